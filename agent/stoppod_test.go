package agent

import (
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// A pod stopped through the CRI (kubeadm reset's StopPodSandbox) is gone
// from the runtime when StopPod returns, its containers and sandbox
// removed; it shows Failed, StoppedByRuntime, meanwhile; its manifest
// makes it again after the hold. A pod that is gone already is stopped.
func TestStopPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		web := testPod("web", "u-web", v1.RestartPolicyAlways, ctr("c", "busybox"))
		h.send([]manifest.Pod{web})
		if got := rt.Running(); len(got) != 1 {
			t.Fatalf("running %q, want the pod's container", got)
		}
		if err := h.a.StopPod(t.Context(), "u-web"); err != nil {
			t.Fatal(err)
		}
		if gone, err := h.a.gone(t.Context(), "u-web"); !gone || err != nil {
			t.Fatalf("the runtime still has the pod after StopPod (%v)", err)
		}
		if got := rt.Calls("destroy"); len(got) != 1 {
			t.Errorf("destroys %q, want the container removed", got)
		}
		synctest.Wait()
		if p := h.pod("web"); p.Status.Phase != v1.PodFailed || p.Status.Reason != reasonStoppedByRuntime {
			t.Errorf("stopped pod: %s %q, want Failed %s", p.Status.Phase, p.Status.Reason, reasonStoppedByRuntime)
		}
		// A second call (RemovePodSandbox after StopPodSandbox) finds it gone.
		if err := h.a.StopPod(t.Context(), "u-web"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(stopHold)
		synctest.Wait()
		if got := rt.Running(); len(got) != 1 {
			t.Fatalf("running %q after the hold, want the pod made again from its manifest", got)
		}
		if p := h.pod("web"); p.Status.Phase != v1.PodRunning {
			t.Errorf("pod after the hold: %s %q, want Running", p.Status.Phase, p.Status.Reason)
		}

		// kubeadm reset's order: the sandbox stopped, then the manifest
		// removed within the hold: the pod is not made again.
		if err := h.a.StopPod(t.Context(), "u-web"); err != nil {
			t.Fatal(err)
		}
		h.send(nil)
		time.Sleep(stopHold)
		synctest.Wait()
		if got := rt.Running(); len(got) != 0 {
			t.Errorf("running %q without a manifest", got)
		}
	})
}
