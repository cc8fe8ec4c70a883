package agent

import (
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// A pod active longer than its activeDeadlineSeconds, counted from its
// startTime, fails with the kubelet's reason and message: its containers are
// stopped (preStop hooks and grace as always) and none starts again, not
// even after a daemon restart.
func TestActiveDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.execFunc = scriptedExec
		rt.crash["crasher"] = 1
		pod := testPod("job", "u1", v1.RestartPolicyAlways,
			withHooks(ctr("main", "busybox"), nil, []string{"drain"}), ctr("crasher", "busybox"))
		ads := int64(30)
		pod.Spec.ActiveDeadlineSeconds = &ads
		h := start(t, rt, Config{})
		t0 := time.Now()
		h.send([]manifest.Pod{pod})
		if st := h.pod("job").Status.StartTime; st == nil || !st.Time.Equal(t0) {
			t.Fatalf("startTime %v, want %v", st, t0)
		}
		time.Sleep(29 * time.Second)
		synctest.Wait()
		if p := h.pod("job"); p.Status.Phase != v1.PodRunning || len(rt.Calls("signal")) != 0 {
			t.Fatalf("before the deadline: phase %s, signals %q", p.Status.Phase, rt.Calls("signal"))
		}
		starts := len(rt.Calls("start"))
		time.Sleep(time.Second)
		synctest.Wait()
		p := h.pod("job")
		if p.Status.Phase != v1.PodFailed || p.Status.Reason != "DeadlineExceeded" ||
			p.Status.Message != "Pod was active on the node longer than the specified deadline" {
			t.Errorf("at the deadline: phase %s reason %q message %q", p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
		if e := h.event("DeadlineExceeded"); e.Type != v1.EventTypeNormal || e.InvolvedObject.Kind != "Pod" {
			t.Errorf("event %+v", e)
		}
		if got := rt.Calls("exec", "signal"); len(got) != 2 || got[0] != "exec c1 drain" || got[1] != "signal c1 terminated" {
			t.Errorf("calls at the deadline %q, want main's preStop then its stop", got)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated == nil {
				t.Errorf("container %s: %+v, want terminated", cs.Name, cs.State)
			}
		}
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if n := len(rt.Calls("start")); n != starts {
			t.Errorf("%d starts after the deadline", n-starts)
		}
		h.stop()

		h = start(t, rt, Config{})
		h.send([]manifest.Pod{pod})
		time.Sleep(time.Minute)
		synctest.Wait()
		if p := h.pod("job"); p.Status.Phase != v1.PodFailed || p.Status.Reason != "DeadlineExceeded" {
			t.Errorf("after a daemon restart: phase %s reason %q", p.Status.Phase, p.Status.Reason)
		}
		if n := len(rt.Calls("start")); n != starts {
			t.Errorf("a restarted daemon started %d containers of the failed pod", n-starts)
		}
	})
}
