package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A sidecar starts before the init container after it and the app, keeps
// running beside the app, and is stopped after it when the pod goes: each
// container appends to a shared host file when it starts and when it gets
// SIGTERM.
func TestSidecarOrder(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := filepath.Join(d.Dir, "events")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// Each long-running container installs its trap before it says it started.
	run := func(name string) string {
		return fmt.Sprintf("trap 'echo %[1]s-stop >> /e/log; sleep 0.3; exit 0' TERM; echo %[1]s-start >> /e/log; while true; do sleep 1 & wait $!; done", name)
	}
	d.WriteManifest("side.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: side}
spec:
  terminationGracePeriodSeconds: 10
  volumes: [{name: e, hostPath: {path: %s}}]
  initContainers:
  - name: proxy
    image: busybox
    restartPolicy: Always
    command: ["sh", "-c", %q]
    volumeMounts: [{name: e, mountPath: /e}]
    startupProbe:
      tcpSocket: {port: 8080}
      periodSeconds: 1
  - name: setup
    image: busybox
    command: ["sh", "-c", "echo setup-done >> /e/log"]
    volumeMounts: [{name: e, mountPath: /e}]
  containers:
  - name: app
    image: busybox
    command: ["sh", "-c", %q]
    volumeMounts: [{name: e, mountPath: /e}]
`, dir, "httpd -p 127.0.0.1:8080 -h /tmp; "+run("proxy"), run("app")))
	d.Start()
	p := d.WaitRunning("side", 60*time.Second)
	if len(p.Status.InitContainerStatuses) != 2 || p.Status.InitContainerStatuses[0].State.Running == nil {
		t.Fatalf("init container statuses %+v, want the sidecar running", p.Status.InitContainerStatuses)
	}
	d.Eventually(30*time.Second, "the app started", func() error {
		if b, _ := os.ReadFile(filepath.Join(dir, "log")); !strings.Contains(string(b), "app-start") {
			return fmt.Errorf("log %q", b)
		}
		return nil
	})
	d.RemoveManifest("side.yaml")
	d.Eventually(60*time.Second, "the pod is gone", func() error {
		if d.Pod("side") != nil {
			return errStill
		}
		return nil
	})
	b, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Fields(string(b)), []string{"proxy-start", "setup-done", "app-start", "app-stop", "proxy-stop"}; strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("order %q, want %q", got, want)
	}
	d.AssertNoLeaks()
}
