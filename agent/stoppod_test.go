package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
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

// StopPod returns once the pod is torn down whole, not once its sandbox is
// no longer listed: a teardown that fails after the sandbox (its volumes
// cannot be removed) keeps the call waiting, and it ends with the caller's
// deadline; once a retry of the teardown succeeds, the next call returns.
func TestStopPodWaitsForTheWholeTeardown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u-web", v1.RestartPolicyAlways, ctr("c", "busybox"))})
		rt.mu.Lock()
		rt.volumesErr = errors.New("device or resource busy")
		rt.mu.Unlock()
		if err := h.stopPodWithin(5*time.Second, "u-web"); err == nil {
			t.Fatal("StopPod returned while the pod's volumes were not removed")
		}
		if got := rt.Calls("rmsandbox"); len(got) == 0 {
			t.Fatalf("calls %q: the sandbox was not removed", rt.Calls())
		}
		rt.mu.Lock()
		rt.volumesErr = nil
		rt.mu.Unlock()
		if err := h.a.StopPod(t.Context(), "u-web"); err != nil {
			t.Fatal(err)
		}
	})
}

// A pod whose sandbox could not be made (here its DNS configuration cannot
// be read) has nothing in the runtime, but its worker holds its UID: StopPod
// tears that down too, and returns.
func TestStopPodOfAPodWithoutItsSandbox(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{ResolvConf: "/nonexistent/resolv.conf"})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		if err := h.stopPodWithin(30*time.Second, "u1"); err != nil {
			t.Fatalf("StopPod of a pod with nothing in the runtime: %v", err)
		}
	})
}

// A pod stopped for good by its active deadline keeps its sandbox (as the
// kubelet's does), but the CRI's stop takes it: StopPod tears it down, and
// returns.
func TestStopPodOfAPodPastItsDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, rt, _ := startPastItsDeadline(t)
		if got := rt.Calls("rmsandbox"); len(got) != 0 {
			t.Fatalf("calls %q: the sandbox of a pod past its deadline removed before StopPod", got)
		}
		if err := h.stopPodWithin(30*time.Second, "u1"); err != nil {
			t.Fatalf("StopPod of a pod past its deadline: %v; calls %q", err, rt.Calls())
		}
		if p := h.pod("web"); p.Status.Reason != "DeadlineExceeded" {
			t.Errorf("pod's reason after StopPod = %q, want DeadlineExceeded kept", p.Status.Reason)
		}
	})
}

// A manifest removed and written again while the CRI's stop holds a pod
// past its active deadline starts the pod again once the hold ends, as it
// would have without the hold.
func TestRecreatedUnderAHoldStartsOnItsLift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, rt, p := startPastItsDeadline(t)
		if err := h.stopPodWithin(30*time.Second, "u1"); err != nil {
			t.Fatal(err)
		}
		p.Recreated = 1
		h.send([]manifest.Pod{p})
		synctest.Wait()
		if got := rt.Running(); len(got) != 0 {
			t.Fatalf("running %q under the hold", got)
		}
		time.Sleep(stopHold)
		synctest.Wait()
		if got := rt.Running(); len(got) != 1 {
			t.Errorf("running %q once the hold ended, want the recreated pod started again", got)
		}
	})
}

// A pod stopping because its manifest was removed and written again starts
// again once stopped, but not while the CRI's stop holds it: StopPod returns
// once it is torn down, and nothing of it comes back before the hold ends.
func TestStopPodOfARecreatedPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.stubborn["a"] = true
		h := start(t, rt, Config{})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		h.send([]manifest.Pod{pod})
		pod.Recreated = 1
		h.send([]manifest.Pod{pod})
		if err := h.stopPodWithin(30*time.Second, "u1"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if got := rt.Calls("sandbox", "start"); !slices.Equal(got, []string{"sandbox u1", "start u1/a#0"}) {
			t.Fatalf("calls %q: the pod came back under the CRI's stop", got)
		}
		if got := rt.Calls("rmsandbox"); len(got) != 1 {
			t.Errorf("sandbox removals %q, want one", got)
		}
		if p := h.pod("web"); p.Status.Phase != v1.PodFailed || p.Status.Reason != reasonStoppedByRuntime {
			t.Errorf("pod under the CRI's stop: %s %q, want Failed %s", p.Status.Phase, p.Status.Reason, reasonStoppedByRuntime)
		}
		time.Sleep(stopHold)
		synctest.Wait()
		if got := rt.Running(); len(got) != 1 {
			t.Errorf("running %q once the hold ended, want the pod made again", got)
		}
	})
}

// A StopPod that comes before the sources have spoken (socket activation:
// kubeadm reset's CRI call started the daemon) waits for the first full
// reconcile, then stops the pod found running although its manifest is
// still there; while no source has spoken, the pod is kept and the caller's
// deadline ends the wait with an error.
func TestStopPodBeforeTheSources(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		rt.adopt(podspec.ContainerStatus{ID: "old-a", PodUID: "u1", PodName: "web-node1", Name: "a",
			Hash: hashOf(&pod.Spec.Containers[0]), Image: "busybox", State: podspec.StateRunning})
		h := start(t, rt, Config{})
		synctest.Wait()

		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		err := h.a.StopPod(ctx, "u1")
		cancel()
		if err == nil || !strings.Contains(err.Error(), "kept until every manifest source has been read") {
			t.Fatalf("StopPod before any source = %v, want the wait's end", err)
		}
		if got := rt.Running(); len(got) != 1 {
			t.Fatalf("running %q, want the pod found running kept", got)
		}

		stopped := make(chan error, 1)
		go func() { stopped <- h.a.StopPod(t.Context(), "u1") }()
		synctest.Wait()
		select {
		case err := <-stopped:
			t.Fatalf("StopPod returned %v before the sources had spoken", err)
		default:
		}
		h.send([]manifest.Pod{pod})
		if err := <-stopped; err != nil {
			t.Fatal(err)
		}
		if gone, err := h.a.gone(t.Context(), "u1"); !gone || err != nil {
			t.Fatalf("the runtime still has the pod after StopPod (%v)", err)
		}
		if got := rt.Calls("start"); len(got) != 0 {
			t.Errorf("starts %q: the pod was made again within the hold", got)
		}
	})
}

// stopPodWithin is StopPod with a deadline d (fake time, in a bubble).
func (h *harness) stopPodWithin(d time.Duration, uid string) error {
	ctx, cancel := context.WithTimeout(h.t.Context(), d)
	defer cancel()
	return h.a.StopPod(ctx, uid)
}

// startPastItsDeadline runs pod web (u1) with an active deadline of 1 s,
// until it has passed: the pod is stopped for good, its sandbox kept.
func startPastItsDeadline(t *testing.T) (*harness, *fakeRuntime, manifest.Pod) {
	t.Helper()
	rt := newFakeRuntime()
	h := start(t, rt, Config{})
	p := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
	deadline := int64(1)
	p.Pod.Spec.ActiveDeadlineSeconds = &deadline
	h.send([]manifest.Pod{p})
	time.Sleep(20 * time.Second)
	synctest.Wait()
	return h, rt, p
}

// A stop already under way with the pod's own long grace period (its
// manifest removed and written again, or removed) is cut short by the CRI's
// stop: the container that ignores its stop signal gets SIGKILL
// stopSandboxGrace (raised to the kubelet's minimum) after StopPod, not the
// pod's 60 s after the stop began, and StopPod returns then; the stop signal
// is not sent again.
func TestStopPodCutsAStopUnderWay(t *testing.T) {
	for _, removed := range []bool{false, true} {
		t.Run(map[bool]string{false: "recreated", true: "removed"}[removed], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newFakeRuntime()
				rt.stubborn["a"] = true
				h := start(t, rt, Config{})
				pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
				sixty := int64(60)
				pod.Spec.TerminationGracePeriodSeconds = &sixty
				h.send([]manifest.Pod{pod})
				if removed {
					h.send(nil)
				} else {
					pod.Recreated = 1
					h.send([]manifest.Pod{pod})
				}
				if got := rt.Calls("signal"); !slices.Equal(got, []string{"signal c1 terminated"}) {
					t.Fatalf("signals %q, want the pod's stop under way", got)
				}
				time.Sleep(5 * time.Second)
				t1 := time.Now()
				if err := h.stopPodWithin(10*time.Second, "u1"); err != nil {
					t.Fatalf("StopPod during a 60 s stop: %v", err)
				}
				if at := rt.When("signal c1 killed"); at.Sub(t1) != manifest.MinimumGracePeriod {
					t.Errorf("SIGKILL %v after StopPod, want %v (calls %q)", at.Sub(t1), manifest.MinimumGracePeriod, rt.Calls())
				}
				if got := rt.Calls("signal"); !slices.Equal(got, []string{"signal c1 terminated", "signal c1 killed"}) {
					t.Errorf("signals %q, want one stop signal, then SIGKILL", got)
				}
			})
		})
	}
}

// An eviction (a hard threshold's 1 s) cuts a stop under way, its preStop
// hook included: the hook is given up at the eviction's grace period, and
// the container then gets the kubelet's minimum after its stop signal. An
// eviction with a longer grace period than is left leaves the stop as it
// was.
func TestEvictionCutsAStopUnderWay(t *testing.T) {
	for _, tc := range []struct {
		name       string
		hook       []string
		grace      time.Duration // the eviction's
		term, kill time.Duration // after the eviction
	}{
		{"hook", []string{"hang"}, time.Second, 2 * time.Second, 4 * time.Second},
		{"signal", nil, time.Second, -5 * time.Second, 2 * time.Second},
		{"longer", nil, 2 * time.Minute, -5 * time.Second, 55 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newFakeRuntime()
				rt.execFunc = scriptedExec
				rt.stubborn["a"] = true
				h := start(t, rt, Config{})
				c := ctr("a", "busybox")
				if tc.hook != nil {
					c = withHooks(c, nil, tc.hook)
				}
				pod := testPod("web", "u1", v1.RestartPolicyAlways, c)
				sixty := int64(60)
				pod.Spec.TerminationGracePeriodSeconds = &sixty
				h.send([]manifest.Pod{pod})
				pod.Recreated = 1
				h.send([]manifest.Pod{pod})
				time.Sleep(5 * time.Second)
				t1 := time.Now()
				h.a.workerOf("u1").setEviction("u1", &stopRequest{reason: reasonEvicted, message: "low on memory", grace: tc.grace})
				time.Sleep(2 * time.Minute)
				synctest.Wait()
				if at := rt.When("signal c1 terminated"); at.IsZero() || at.Sub(t1) != tc.term {
					t.Errorf("stop signal %v after the eviction, want %v (calls %q)", at.Sub(t1), tc.term, rt.Calls())
				}
				if at := rt.When("signal c1 killed"); at.IsZero() || at.Sub(t1) != tc.kill {
					t.Errorf("SIGKILL %v after the eviction, want %v (calls %q)", at.Sub(t1), tc.kill, rt.Calls())
				}
				if p := h.pod("web"); p.Status.Reason != reasonEvicted {
					t.Errorf("pod's reason %q, want %s", p.Status.Reason, reasonEvicted)
				}
			})
		})
	}
}
