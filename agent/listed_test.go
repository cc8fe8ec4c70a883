package agent

import (
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// A daemon just started lists no pod until its workers have published
// them: Listed stays open until every pod of the first full reconcile (one
// its manifest still wants, one found running without a manifest) is
// listed, and a pod that comes later does not hold it.
func TestListedOnceEveryPodOfTheStartIsPublished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.sandboxGate = make(chan struct{})
		web := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		rt.adopt(podspec.ContainerStatus{ID: "old-a", PodUID: "u1", PodName: "web-node1", PodNamespace: "default", Name: "a",
			Hash: hashOf(&web.Spec.Containers[0]), Image: "busybox", State: podspec.StateRunning})
		rt.adopt(podspec.ContainerStatus{ID: "old-x", PodUID: "u0", PodName: "gone-node1", PodNamespace: "default", Name: "x",
			Image: "busybox", State: podspec.StateRunning})
		h := start(t, rt, Config{})
		release := sync.OnceFunc(func() { close(rt.sandboxGate) })
		t.Cleanup(release) // before the agent's stop, which a held worker holds up
		synctest.Wait()
		listed := func() bool {
			select {
			case <-h.a.Listed():
				return true
			default:
				return false
			}
		}
		if listed() {
			t.Fatal("listed before any source spoke")
		}
		h.send([]manifest.Pod{web})
		// web's worker waits on its sandbox's status, before its first
		// publish; gone's stops its pod, which the fake runtime ends at
		// once.
		if listed() {
			t.Fatalf("listed while web's worker has not published; Pods %v", podNames(h.a.Pods()))
		}
		if got := podNames(h.a.Pods()); slices.Contains(got, "web-node1") {
			t.Fatalf("Pods %v before web's first publish", got)
		}
		release()
		synctest.Wait()
		if !listed() {
			t.Fatalf("not listed once every worker published; Pods %v", podNames(h.a.Pods()))
		}
		if p := h.pod("web"); p.Status.Phase != v1.PodRunning {
			t.Errorf("web %s once listed, want Running", p.Status.Phase)
		}
	})
	// No pod at all: listed at the first full reconcile.
	synctest.Test(t, func(t *testing.T) {
		h := start(t, newFakeRuntime(), Config{})
		h.send(nil)
		select {
		case <-h.a.Listed():
		default:
			t.Fatal("an empty node not listed once its sources spoke")
		}
	})
}

func podNames(pods []v1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}
