//go:build controlplane

package mirror

import (
	"fmt"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// staticpodd restart replaces the mirror pod, as an edit does: the new one
// names the new generation (config.mirror) and says why
// (kubectl.kubernetes.io/restartedAt), as kubectl shows a rolled-out pod.
func TestMirrorPodOfRestart(t *testing.T) {
	f := newFixture(t)
	f.d.WriteManifest("r.yaml", sleeper("r", "1"))
	f.d.Start()
	first := f.waitMirror("r", 60*time.Second, "the mirror pod running", running)
	f.d.CLI("restart", "r")
	var at string
	f.waitMirror("r", 60*time.Second, "the restarted generation's mirror pod", func(p *v1.Pod) error {
		local := f.d.Pod("r")
		if local == nil || p.Annotations[annotationMirror] == first.Annotations[annotationMirror] {
			return fmt.Errorf("mirror of %s still", first.Annotations[annotationMirror])
		}
		if p.Annotations[annotationMirror] != string(local.UID) {
			return fmt.Errorf("mirror of %s, local pod %s", p.Annotations[annotationMirror], local.UID)
		}
		at = p.Annotations["kubectl.kubernetes.io/restartedAt"]
		if at == "" || at != local.Annotations["kubectl.kubernetes.io/restartedAt"] {
			return fmt.Errorf("restartedAt %q, local %q", at, local.Annotations["kubectl.kubernetes.io/restartedAt"])
		}
		if _, ok := p.Annotations["staticpodd.io/manifest-uid"]; ok {
			t.Errorf("the mirror pod shows the agent's own annotation: %v", p.Annotations)
		}
		return running(p)
	})
}
