package agent

import (
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// The sandbox is asked for with the image of the container that starts
// first after it, normalised (an init container's, when there is one), so
// that the runtime may prepare it meanwhile.
func TestSandboxToldItsFirstImage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		plain := testPod("web", "u1", v1.RestartPolicyAlways, ctr("main", "nginx:1.27"))
		withInit := testPod("job", "u2", v1.RestartPolicyAlways, ctr("main", "nginx:1.27"))
		withInit.Spec.InitContainers = []v1.Container{ctr("init", "busybox")}
		h.send([]manifest.Pod{plain, withInit})
		rt.mu.Lock()
		defer rt.mu.Unlock()
		for uid, want := range map[string]string{"u1": "docker.io/library/nginx:1.27", "u2": "docker.io/library/busybox:latest"} {
			if got := rt.firstImages[uid]; got != want {
				t.Errorf("pod %s: sandbox told first image %q, want %q", uid, got, want)
			}
		}
	})
}
