package agent

import (
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// A teardown that removed the sandbox but failed after it (the pod's
// volumes could not be removed), or whose RemoveSandbox failed itself once
// the sandbox's record was gone (its cgroup busy), leaves a pod without its
// sandbox: when the same pod starts again (the CRI's hold lifted before a
// retry of the teardown succeeded), it makes its sandbox again before its
// containers (it tried to start them in the sandbox removed, for ever).
func TestPodBackAfterAHalfFailedTeardownMakesItsSandbox(t *testing.T) {
	for _, tc := range []struct {
		name string
		fail func(*fakeRuntime) *error
	}{
		{"volumes", func(rt *fakeRuntime) *error { return &rt.volumesErr }},
		{"sandbox", func(rt *fakeRuntime) *error { return &rt.rmSandboxErr }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newFakeRuntime()
				h := start(t, rt, Config{})
				h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
				rt.mu.Lock()
				*tc.fail(rt) = errors.New("device or resource busy")
				rt.mu.Unlock()
				if err := h.stopPodWithin(5*time.Second, "u1"); err == nil {
					t.Fatal("StopPod returned while the pod was not torn down")
				}
				if got := rt.Calls("rmsandbox"); len(got) == 0 {
					t.Fatalf("calls %q: the sandbox was not removed", rt.Calls())
				}
				// The hold ends (stopHold) while the teardown still fails.
				time.Sleep(stopHold)
				synctest.Wait()
				rt.mu.Lock()
				*tc.fail(rt) = nil
				rt.mu.Unlock()
				time.Sleep(time.Minute)
				synctest.Wait()
				if got := rt.Calls("sandbox", "start"); !slices.Equal(got, []string{"sandbox u1", "start u1/a#0", "sandbox u1", "start u1/a#0"}) {
					t.Errorf("calls %q, want the sandbox made again before the pod's container", got)
				}
				if got := rt.Running(); len(got) != 1 {
					t.Errorf("running %q, want the pod back; calls %q", got, rt.Calls())
				}
			})
		})
	}
}
