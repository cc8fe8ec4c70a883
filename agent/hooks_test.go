package agent

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// scriptedExec plays exec hooks: "wait N" takes N seconds, "hang" runs until
// cancelled, "fail" exits 1 saying boom on stderr, anything else exits 0.
func scriptedExec(ctx context.Context, _ podspec.ContainerStatus, spec podspec.ExecSpec) (int, error) {
	switch spec.Cmd[0] {
	case "wait":
		n, _ := strconv.Atoi(spec.Cmd[1])
		select {
		case <-time.After(time.Duration(n) * time.Second):
			return 0, nil
		case <-ctx.Done():
			return -1, ctx.Err()
		}
	case "hang":
		<-ctx.Done()
		return -1, ctx.Err()
	case "fail":
		fmt.Fprint(spec.Stderr, "boom")
		return 1, nil
	}
	return 0, nil
}

func withHooks(c v1.Container, postStart, preStop []string) v1.Container {
	c.Lifecycle = &v1.Lifecycle{}
	if postStart != nil {
		c.Lifecycle.PostStart = &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: postStart}}
	}
	if preStop != nil {
		c.Lifecycle.PreStop = &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: preStop}}
	}
	return c
}

func statusOf(p v1.Pod, name string) v1.ContainerStatus {
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if cs.Name == name {
			return cs
		}
	}
	return v1.ContainerStatus{}
}

// While a container's postStart hook runs, it runs but has not started, is
// not probed, and the pod's next containers wait; the rest of the daemon, and
// the pod's status, go on.
func TestPostStartHoldsTheContainerAndThoseAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.execFunc = scriptedExec
		rt.SetHealth("/ready", 200)
		a := withHooks(ctr("a", "busybox"), []string{"wait", "5"}, nil)
		a.ReadinessProbe = &v1.Probe{PeriodSeconds: 1, ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: "/ready", Port: intstr.FromInt(80)}}}
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{
			testPod("web", "u1", v1.RestartPolicyAlways, a, ctr("b", "busybox")),
			testPod("other", "u2", v1.RestartPolicyAlways, ctr("x", "busybox")),
		})
		time.Sleep(4 * time.Second)
		synctest.Wait()
		p := h.pod("web")
		if cs := statusOf(p, "a"); cs.State.Running == nil || *cs.Started || cs.Ready {
			t.Errorf("a during its postStart: %+v, want running, not started, not ready", cs)
		}
		if cs := statusOf(p, "b"); cs.State.Waiting == nil {
			t.Errorf("b started during a's postStart: %+v", cs)
		}
		id := strings.TrimPrefix(statusOf(p, "a").ContainerID, containerIDPrefix)
		if got := rt.Calls("start u1", "exec"); !slices.Equal(got, []string{"start u1/a#0", "exec " + id + " wait 5"}) {
			t.Errorf("calls during the hook %q", got)
		}
		if len(rt.dials) != 0 {
			t.Errorf("a probed during its postStart: %q", rt.dials)
		}
		if cs := statusOf(h.pod("other"), "x"); cs.State.Running == nil {
			t.Errorf("another pod waited for the hook: %+v", cs)
		}
		if got := rt.marks.List(); !slices.Equal(got, []string{"u1/a#0"}) {
			t.Errorf("marks during the hook %q", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		p = h.pod("web")
		if cs := statusOf(p, "a"); !*cs.Started || !cs.Ready {
			t.Errorf("a after its postStart: %+v, want started and ready", cs)
		}
		if cs := statusOf(p, "b"); cs.State.Running == nil {
			t.Errorf("b not started after a's postStart: %+v", cs)
		}
		if d := rt.When("start u1/b#0").Sub(rt.When("start u1/a#0")); d != 5*time.Second {
			t.Errorf("b started %v after a, want the hook's 5s", d)
		}
		if got := rt.marks.List(); len(got) != 0 {
			t.Errorf("marks after the hook %q", got)
		}
	})
}

// A failed postStart kills the container (with the pod's grace); it waits
// with PostStartHookError and the kubelet's message, then restarts with the
// crash-loop back-off.
func TestPostStartFailureKillsAndRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.execFunc = scriptedExec
		rt.stubborn["a"] = true // so the kill is seen taking the grace period
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, withHooks(ctr("a", "busybox"), []string{"fail"}, nil))})
		if got := rt.Calls("signal"); !slices.Equal(got, []string{"signal c1 terminated"}) {
			t.Fatalf("signals after a failed postStart %q", got)
		}
		// The kubelet's events, without the hook's output.
		if e := h.event("FailedPostStartHook"); e.Type != v1.EventTypeWarning || e.Message != "PostStartHook failed" ||
			e.InvolvedObject.FieldPath != "spec.containers{a}" {
			t.Errorf("event %+v", e)
		}
		if e := h.event("Killing"); e.Message != "FailedPostStartHook" {
			t.Errorf("Killing event %+v", e)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := rt.Calls("signal", "start"); !slices.Equal(got, []string{
			"start u1/a#0", "signal c1 terminated", "signal c1 killed", "start u1/a#1", "signal c2 terminated",
		}) {
			t.Fatalf("calls %q: want killed after the 5s grace, restarted at once, killed again", got)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		cs := statusOf(h.pod("web"), "a")
		if w := cs.State.Waiting; w == nil || w.Reason != reasonCrashLoop {
			t.Errorf("after the second failure: %+v, want waiting in CrashLoopBackOff", cs.State)
		}
		if cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 137 {
			t.Errorf("restartCount %d, lastState %+v", cs.RestartCount, cs.LastTerminationState)
		}
		// Between its kill and its restart it waited with the kubelet's
		// reason: systemd's STATUS said so.
		if _, statuses, _ := h.n.snapshot(); !slices.Contains(statuses, "1 pod: 1 waiting (web: PostStartHookError)") {
			t.Errorf("STATUS never said PostStartHookError: %q", statuses)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := rt.Calls("start"); len(got) != 3 {
			t.Errorf("starts %q, want a third after the 10s back-off", got)
		}
	})
}

// After a failed postStart the restartPolicy decides on the exit code, as
// for any exit: a container that will not be restarted shows terminated, not
// waiting, and the pod's phase follows.
func TestPostStartFailureUnderPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy   v1.RestartPolicy
		code     int // the exit the kill gets
		restarts bool
		phase    v1.PodPhase
	}{
		{v1.RestartPolicyOnFailure, 143, true, v1.PodRunning},
		{v1.RestartPolicyOnFailure, 0, false, v1.PodSucceeded},
		{v1.RestartPolicyNever, 143, false, v1.PodFailed},
	} {
		t.Run(fmt.Sprintf("%s/%d", tc.policy, tc.code), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newFakeRuntime()
				rt.execFunc = scriptedExec
				rt.stubborn["a"] = true
				h := start(t, rt, Config{})
				h.send([]manifest.Pod{testPod("web", "u1", tc.policy, withHooks(ctr("a", "busybox"), []string{"fail"}, nil))})
				rt.Exit("c1", tc.code) // how it takes its stop signal
				synctest.Wait()
				p := h.pod("web")
				cs := statusOf(p, "a")
				if got := len(rt.Calls("start")) > 1; got != tc.restarts {
					t.Errorf("restarted: %v, want %v (calls %q)", got, tc.restarts, rt.Calls())
				}
				if !tc.restarts && (cs.State.Terminated == nil || int(cs.State.Terminated.ExitCode) != tc.code) {
					t.Errorf("state %+v, want terminated with %d", cs.State, tc.code)
				}
				if p.Status.Phase != tc.phase {
					t.Errorf("phase %s, want %s", p.Status.Phase, tc.phase)
				}
			})
		})
	}
}

// A daemon that dies during a postStart hook (the hook's process dies with
// it) leaves a mark: the next daemon runs the hook again, and until it is done
// the container has not started. A hook that was done is not run again.
func TestPostStartRunAgainAfterDaemonRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.execFunc = scriptedExec
		pod := testPod("web", "u1", v1.RestartPolicyAlways,
			withHooks(ctr("done", "busybox"), []string{"quick"}, nil),
			withHooks(ctr("cut", "busybox", "x"), []string{"hang"}, nil))
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{pod})
		if got := rt.marks.List(); !slices.Equal(got, []string{"u1/cut#0"}) {
			t.Fatalf("marks %q, want the hanging hook's", got)
		}
		h.stop() // the daemon dies; the containers run on

		rt.mu.Lock()
		rt.execFunc = func(ctx context.Context, c podspec.ContainerStatus, spec podspec.ExecSpec) (int, error) {
			if spec.Cmd[0] == "hang" {
				spec.Cmd = []string{"wait", "3"} // it finishes this time
			}
			return scriptedExec(ctx, c, spec)
		}
		rt.mu.Unlock()
		h = start(t, rt, Config{})
		h.send([]manifest.Pod{pod})
		if cs := statusOf(h.pod("web"), "cut"); cs.State.Running == nil || *cs.Started {
			t.Errorf("cut after the restart: %+v, want running, not started while its hook runs again", cs)
		}
		if cs := statusOf(h.pod("web"), "done"); !*cs.Started {
			t.Errorf("done after the restart: %+v, want started", cs)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if cs := statusOf(h.pod("web"), "cut"); !*cs.Started {
			t.Errorf("cut once its hook is done: %+v, want started", cs)
		}
		if got := rt.Calls("exec"); len(got) != 3 {
			t.Errorf("execs %q, want quick once and hang twice", got)
		}
		if got := rt.Calls("start", "signal"); len(got) != 2 {
			t.Errorf("calls %q: the restart started or stopped something", got)
		}
		if got := rt.marks.List(); len(got) != 0 {
			t.Errorf("marks %q, want none", got)
		}
	})
}

// A pod removed during a postStart hook stops the hook and the container at
// once, without waiting for it.
func TestPostStartCancelledByRemoval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.execFunc = scriptedExec
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, withHooks(ctr("a", "busybox"), []string{"hang"}, nil))})
		t0 := time.Now()
		h.send(nil)
		if rt.Len() != 0 || time.Since(t0) != 0 {
			t.Errorf("pod not removed at once (%v): calls %q", time.Since(t0), rt.Calls())
		}
	})
}

// A preStop hook runs before the stop signal, and its time comes out of the
// grace period: with 10s of grace and a 3s hook, SIGTERM at 3s, SIGKILL at 10s.
func TestPreStopTakesItsTimeFromTheGrace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.execFunc = scriptedExec
		rt.stubborn["a"] = true
		h := start(t, rt, Config{})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, withHooks(ctr("a", "busybox"), nil, []string{"wait", "3"}))
		ten := int64(10)
		pod.Spec.TerminationGracePeriodSeconds = &ten
		h.send([]manifest.Pod{pod})
		t0 := time.Now()
		h.send(nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		for call, want := range map[string]time.Duration{
			"exec c1 wait 3": 0, "signal c1 terminated": 3 * time.Second, "signal c1 killed": 10 * time.Second,
		} {
			if at := rt.When(call); at.IsZero() || at.Sub(t0) != want {
				t.Errorf("%s at %v, want %v (calls %q)", call, at.Sub(t0), want, rt.Calls())
			}
		}
	})
}

// A preStop hook gets the grace period at most; the container then gets the
// kubelet's minimum of 2s after its stop signal. One that fails is logged and
// the stop goes on at once.
func TestPreStopBoundedAndFailing(t *testing.T) {
	for _, tc := range []struct {
		hook       []string
		term, kill time.Duration
	}{
		{[]string{"hang"}, 10 * time.Second, 12 * time.Second},
		{[]string{"fail"}, 0, 10 * time.Second},
	} {
		t.Run(tc.hook[0], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newFakeRuntime()
				rt.execFunc = scriptedExec
				rt.stubborn["a"] = true
				h := start(t, rt, Config{})
				pod := testPod("web", "u1", v1.RestartPolicyAlways, withHooks(ctr("a", "busybox"), nil, tc.hook))
				ten := int64(10)
				pod.Spec.TerminationGracePeriodSeconds = &ten
				h.send([]manifest.Pod{pod})
				t0 := time.Now()
				h.send(nil)
				time.Sleep(time.Minute)
				synctest.Wait()
				if at := rt.When("signal c1 terminated"); at.Sub(t0) != tc.term {
					t.Errorf("SIGTERM at %v, want %v", at.Sub(t0), tc.term)
				}
				if at := rt.When("signal c1 killed"); at.Sub(t0) != tc.kill {
					t.Errorf("SIGKILL at %v, want %v", at.Sub(t0), tc.kill)
				}
				failed := slices.Contains(h.reasons(), "FailedPreStopHook")
				if failed != (tc.hook[0] == "fail") {
					t.Errorf("FailedPreStopHook event: %v; events %q", failed, h.reasons())
				}
			})
		})
	}
}

// preStop hooks of every kind: sleep, and httpGet into the pod's network
// (status codes not checked); a container that exits during its hook is not
// signalled at all.
func TestPreStopKinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.execFunc = scriptedExec
		sleeper := ctr("sleeper", "busybox")
		sleeper.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 4}}}
		web := ctr("web", "busybox")
		web.Ports = []v1.ContainerPort{{Name: "http", ContainerPort: 8080}}
		web.Lifecycle = &v1.Lifecycle{PreStop: &v1.LifecycleHandler{HTTPGet: &v1.HTTPGetAction{Path: "/quit", Port: intstr.FromString("http")}}}
		quitter := withHooks(ctr("quitter", "busybox"), nil, []string{"hang"})
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("p", "u1", v1.RestartPolicyAlways, sleeper, web, quitter)})
		ids := map[string]string{}
		for _, cs := range h.pod("p").Status.ContainerStatuses {
			ids[cs.Name] = strings.TrimPrefix(cs.ContainerID, containerIDPrefix)
		}
		t0 := time.Now()
		h.updates <- sourceUpdate(manifest.SourceFile)
		time.Sleep(time.Second)
		rt.Exit(ids["quitter"], 0) // exits on its own during its hook
		time.Sleep(time.Minute)
		synctest.Wait()
		if at := rt.When("signal " + ids["sleeper"] + " terminated"); at.Sub(t0) != 4*time.Second {
			t.Errorf("sleeper signalled at %v, want after its 4s sleep", at.Sub(t0))
		}
		if at := rt.When("signal " + ids["web"] + " terminated"); at.Sub(t0) != 0 {
			t.Errorf("web signalled at %v, want at once after its httpGet", at.Sub(t0))
		}
		if !slices.Equal(rt.dials, []string{"u1 127.0.0.1:8080"}) {
			t.Errorf("dials %q, want the pod's 127.0.0.1:8080", rt.dials)
		}
		if got := rt.Calls("signal " + ids["quitter"]); len(got) != 0 {
			t.Errorf("quitter signalled after it exited during its hook: %q", got)
		}
		if rt.Len() != 0 {
			t.Errorf("pod not removed: %q", rt.Calls())
		}
	})
}

// An edit replaces the pod under a new UID: the old generation's containers
// run their preStop hooks, from the old spec.
func TestPreStopOfAnOldGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.execFunc = scriptedExec
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, withHooks(ctr("a", "busybox"), nil, []string{"drain", "old"}))})
		h.send([]manifest.Pod{testPod("web", "u2", v1.RestartPolicyAlways, withHooks(ctr("a", "busybox", "new"), nil, []string{"drain", "new"}))})
		if got := rt.Calls("exec"); !slices.Equal(got, []string{"exec c1 drain old"}) {
			t.Errorf("execs %q, want the old generation's preStop", got)
		}
		if got := rt.Calls("start"); !slices.Equal(got, []string{"start u1/a#0", "start u2/a#0"}) {
			t.Errorf("starts %q", got)
		}
	})
}

// A container that exits during its postStart hook ends the hook: it is
// restarted as any exited container, without waiting for the hook.
func TestPostStartEndsWithTheContainer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.execFunc = scriptedExec
		a := ctr("a", "busybox")
		a.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Sleep: &v1.SleepAction{Seconds: 30}}}
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, a, ctr("b", "busybox"))})
		time.Sleep(time.Second)
		rt.Exit("c1", 1)
		synctest.Wait()
		if got := rt.Calls("start"); !slices.Equal(got, []string{"start u1/a#0", "start u1/a#1"}) {
			t.Errorf("starts %q: want a restarted at once, b held by the new hook", got)
		}
	})
}

// A container found after a restart whose pod no manifest wants any more is
// stopped after its preStop hook, which it was started with (the kubelet's
// restoreSpecsFromContainerLabels), a named port included.
func TestPreStopOfAnAdoptedOrphan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.execFunc = scriptedExec
		rt.adopt(podspec.ContainerStatus{ID: "old", PodUID: "u0", PodName: "gone-node1", PodNamespace: "default", Name: "x",
			State: podspec.StateRunning, Annotations: map[string]string{
				manifest.AnnotationPreStopHandler: `{"exec":{"command":["drain","now"]}}`,
			}})
		rt.adopt(podspec.ContainerStatus{ID: "web", PodUID: "u0", PodName: "gone-node1", PodNamespace: "default", Name: "w",
			State: podspec.StateRunning, Annotations: map[string]string{
				manifest.AnnotationPreStopHandler: `{"httpGet":{"path":"/quit","port":"admin","scheme":"HTTP"}}`,
				manifest.AnnotationContainerPorts: `[{"name":"admin","containerPort":9000}]`,
			}})
		h := start(t, rt, Config{})
		h.send(nil)
		if got := rt.Calls("exec", "signal old"); !slices.Equal(got, []string{"exec old drain now", "signal old terminated"}) {
			t.Errorf("calls %q, want the preStop hook then the stop", got)
		}
		if !slices.Equal(rt.dials, []string{"u0 127.0.0.1:9000"}) {
			t.Errorf("dials %q, want the named port's", rt.dials)
		}
	})
}
