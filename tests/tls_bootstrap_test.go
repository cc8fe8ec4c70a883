package tests

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// TLS bootstrap against an API server that accepts connections and never
// answers: pods start and stop on time, the kubeconfig is written pointing
// at the certificate to come, /healthz?verbose says the certificate is
// awaited, and the daemon stops promptly. (The bootstrap itself is proven
// against a real API server and controller manager in tests/mirror.)
func TestTLSBootstrapNeverAnswered(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		var held []net.Conn
		defer func() {
			for _, c := range held {
				c.Close()
			}
		}()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			held = append(held, c)
		}
	}()
	boot := filepath.Join(d.Dir, "bootstrap-kubelet.conf")
	if err := os.WriteFile(boot, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://%s", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: abcdef.0123456789abcdef}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, l.Addr())), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(d.Dir, "kubernetes", "kubelet.conf")
	certDir := filepath.Join(d.Dir, "pki")
	d.Args = append(d.Args, "--bootstrap-kubeconfig", boot, "--kubeconfig", kubeconfig, "--cert-dir", certDir)
	d.Start()
	began := time.Now()
	d.WriteManifest("web.yaml", sleeper("web", ""))
	d.WaitRunning("web", 30*time.Second)
	t.Logf("web running %v after its manifest, the API server never answering", time.Since(began).Round(time.Millisecond))

	d.Eventually(30*time.Second, "healthz says the certificate is awaited", func() error {
		resp, err := d.Client().Get(d.URL("/healthz?verbose"))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if h := string(b); resp.StatusCode != 200 || !strings.Contains(h, "[-]mirror-pods failed") ||
			!strings.Contains(h, "client certificate: no valid client certificate in "+certDir) {
			return fmt.Errorf("healthz %d:\n%s", resp.StatusCode, h)
		}
		return nil
	})
	loaded, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatalf("kubeconfig not written: %v", err)
	}
	if auth := loaded.AuthInfos[loaded.Contexts[loaded.CurrentContext].AuthInfo]; auth.ClientCertificate != filepath.Join(certDir, "kubelet-client-current.pem") {
		t.Errorf("kubeconfig's user %+v", auth)
	}
	if fi, err := os.Stat(certDir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("cert dir %v %v, want 0700", fi, err)
	}
	d.RemoveManifest("web.yaml")
	d.Eventually(30*time.Second, "web removed", func() error {
		if p := d.Pod("web"); p != nil {
			return fmt.Errorf("web still listed: %s", p.Status.Phase)
		}
		return nil
	})
	stopping := time.Now()
	d.Stop()
	if took := time.Since(stopping); took > 5*time.Second {
		t.Errorf("the daemon took %v to stop with a CSR in flight", took)
	}
}
