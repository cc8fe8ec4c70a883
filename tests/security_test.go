package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// What a pod's securityContext asks for is what its processes get.
func TestSecurityContext(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	pod := func(name, sc, cmd string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", %q]
    securityContext: %s
`, name, cmd, sc)
	}
	// Docker's default capabilities: no CAP_SYS_ADMIN, so no mount.
	d.WriteManifest("plain.yaml", pod("plain", "{}", "id -u; mkdir -p /tmp/m; mount -t tmpfs none /tmp/m 2>/dev/null && echo mounted || echo refused"))
	d.WriteManifest("priv.yaml", pod("priv", "{privileged: true}", "id -u; mkdir -p /tmp/m; mount -t tmpfs none /tmp/m 2>/dev/null && echo mounted || echo refused"))
	d.WriteManifest("user.yaml", pod("user", "{runAsUser: 65534, runAsGroup: 65534}", "id -u; id -g"))
	d.WriteManifest("nonroot.yaml", pod("nonroot", "{runAsNonRoot: true}", "id -u"))

	for name, want := range map[string]string{"plain": "0\nrefused\n", "priv": "0\nmounted\n", "user": "65534\n65534\n"} {
		d.Eventually(30*time.Second, name+" ran", func() error {
			p := d.Pod(name)
			if p == nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil {
				return fmt.Errorf("not terminated yet")
			}
			return nil
		})
		if out := d.CLI("logs", name); out != want {
			t.Errorf("pod %s printed %q, want %q", name, out, want)
		}
	}
	// runAsNonRoot over an image that runs as root: refused, as the kubelet does.
	d.Eventually(30*time.Second, "nonroot refused", func() error {
		p := d.Pod("nonroot")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("no status")
		}
		w := p.Status.ContainerStatuses[0].State.Waiting
		if w == nil || w.Reason != "CreateContainerConfigError" || !strings.Contains(w.Message, "runAsNonRoot and image will run as root") {
			return fmt.Errorf("state %+v", p.Status.ContainerStatuses[0].State)
		}
		return nil
	})
}
