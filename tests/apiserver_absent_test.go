package tests

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// A kubeconfig whose API server refuses every connection: pods start, restart
// and stop on time, and /healthz?verbose says what fails. (The mirror pods
// themselves are proven against a real API server in tests/mirror.)
func TestAPIServerAbsentLeavesPodsAlone(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	addr := testdaemon.RefusingAddr(t)
	kubeconfig := filepath.Join(d.Dir, "kubelet.conf")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://%s", insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: test}
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, addr)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d.Args = append(d.Args, "--kubeconfig", kubeconfig)
	d.Start()
	began := time.Now()
	d.WriteManifest("web.yaml", sleeper("web", ""))
	d.WaitRunning("web", 30*time.Second)
	t.Logf("web running %v after its manifest, the API server refusing", time.Since(began).Round(time.Millisecond))

	d.Eventually(30*time.Second, "healthz names the API server's failure", func() error {
		resp, err := d.Client().Get(d.URL("/healthz?verbose"))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if h := string(b); resp.StatusCode != 200 || !strings.Contains(h, "[-]mirror-pods failed") || !strings.Contains(h, "connection refused") {
			return fmt.Errorf("healthz %d:\n%s", resp.StatusCode, h)
		}
		return nil
	})
	d.RemoveManifest("web.yaml")
	d.Eventually(30*time.Second, "web removed", func() error {
		if p := d.Pod("web"); p != nil {
			return fmt.Errorf("web still listed: %s", p.Status.Phase)
		}
		return nil
	})
	if !d.Running() {
		t.Fatal("the daemon exited")
	}
}
