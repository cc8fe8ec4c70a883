package agent

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/status"
)

// restartAllOn is a RestartAllContainers rule on exit codes codes, with
// the container's own restartPolicy Never.
func restartAllOn(c v1.Container, codes ...int32) v1.Container {
	c.RestartPolicy = new(v1.ContainerRestartPolicyNever)
	c.RestartPolicyRules = []v1.ContainerRestartRule{{
		Action:    v1.ContainerRestartRuleActionRestartAllContainers,
		ExitCodes: &v1.ContainerRestartRuleOnExitCodes{Operator: v1.ContainerRestartRuleOnExitCodesOpIn, Values: codes},
	}}
	return c
}

// The pod of the kubelet's node e2e test "should restart all containers on
// regular container exit": an init container, a sidecar, a container
// whose exit 42 restarts all, and another one, under restartPolicy Never.
func restartAllPod() manifest.Pod {
	return withInit(testPod("web", "u1", v1.RestartPolicyNever,
		restartAllOn(ctr("source", "busybox"), 42), ctr("regular", "busybox")),
		ctr("init", "busybox"), sidecar("sidecar"))
}

// A regular container exits with a code its RestartAllContainers rule
// matches: every container of the pod is stopped at once (no preStop, the
// least grace) and removed, the others first, then the pod runs again from
// its first init container, each container as its next attempt, in the
// same sandbox; its status shows it as the kubelet's does.
func TestRestartAllContainersOnExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{restartAllPod()})
		rt.Exit("c1", 0) // init done
		synctest.Wait()
		// c1 init, c2 sidecar, c3 source, c4 regular.
		if got := rt.Calls("start"); len(got) != 4 {
			t.Fatalf("starts %q", got)
		}
		p := h.pod("web")
		if p.Status.Phase != v1.PodRunning {
			t.Fatalf("phase %s", p.Status.Phase)
		}
		if c := condition(p, v1.AllContainersRestarting); c.Status != v1.ConditionFalse {
			t.Errorf("before the exit: %+v", c)
		}

		rt.Exit("c3", 42)
		synctest.Wait()
		// The kubelet's order: the others, regular then init containers in
		// the spec's order, then the source.
		if got, want := rt.Calls("signal", "destroy"), []string{
			"signal c4 terminated", "destroy c4", "destroy c1", "signal c2 terminated", "destroy c2", "destroy c3",
		}; !slices.Equal(got, want) {
			t.Fatalf("reset %q, want %q", got, want)
		}
		if got, want := rt.Calls("start")[4:], []string{"start u1/init#1"}; !slices.Equal(got, want) {
			t.Fatalf("starts after the reset %q, want %q", got, want)
		}
		if got := rt.Calls("sandbox", "teardown"); len(got) != 1 {
			t.Errorf("the sandbox must stay: %q", got)
		}
		p = h.pod("web")
		if p.Status.Phase != v1.PodPending || condition(p, v1.PodInitialized).Status != v1.ConditionTrue {
			t.Errorf("init container again: phase %s, initialized %+v", p.Status.Phase, condition(p, v1.PodInitialized))
		}
		for _, cs := range slices.Concat(p.Status.ContainerStatuses, p.Status.InitContainerStatuses[1:]) {
			last := cs.LastTerminationState.Terminated
			if cs.RestartCount != 1 || cs.State.Waiting == nil || last == nil ||
				last.Reason != status.RestartingAllContainers || last.ExitCode != 137 || last.ContainerID != "" {
				t.Errorf("%s while the init container runs again: %+v", cs.Name, cs)
			}
		}

		rt.Exit("c5", 0) // init done again
		synctest.Wait()
		if got, want := rt.Calls("start")[4:], []string{
			"start u1/init#1", "start u1/sidecar#1", "start u1/source#1", "start u1/regular#1",
		}; !slices.Equal(got, want) {
			t.Fatalf("starts after the reset %q, want %q", got, want)
		}
		p = h.pod("web")
		if p.Status.Phase != v1.PodRunning {
			t.Errorf("phase %s", p.Status.Phase)
		}
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			if cs.RestartCount != 1 {
				t.Errorf("%s restartCount %d, want 1", cs.Name, cs.RestartCount)
			}
		}
		if c := condition(p, v1.AllContainersRestarting); c.Status != v1.ConditionFalse {
			t.Errorf("after the restart: %+v", c)
		}
		var kills []string
		for _, e := range h.a.Events().List() {
			if e.Reason == "Killing" {
				kills = append(kills, e.InvolvedObject.FieldPath+": "+e.Message)
			}
		}
		slices.Sort(kills)
		if want := []string{"spec.containers{regular}: killing", "spec.initContainers{sidecar}: killing"}; !slices.Equal(kills, want) {
			t.Errorf("Killing events %q, want %q", kills, want)
		}

		// An exit its rule does not match: restartPolicy Never, nothing more.
		rt.Exit("c7", 1)
		synctest.Wait()
		if got := rt.Calls("destroy"); len(got) != 4 {
			t.Errorf("an unmatched exit code restarted all: %q", got)
		}
		cs := h.pod("web").Status.ContainerStatuses
		i := slices.IndexFunc(cs, func(s v1.ContainerStatus) bool { return s.Name == "source" })
		if t1 := cs[i].State.Terminated; t1 == nil || t1.ExitCode != 1 || cs[i].RestartCount != 1 {
			t.Errorf("source after exit 1: %+v", cs[i])
		}
	})
}

// The status right after a matching exit, before anything is removed:
// AllContainersRestarting is true, and the pod stays Running though the
// container's restartPolicy is Never.
func TestRestartAllContainersCondition(t *testing.T) {
	pod := restartAllPod().Pod
	ran := func(name, id string, state podspec.State, code int) podspec.ContainerStatus {
		return podspec.ContainerStatus{ID: id, PodUID: "u1", Name: name, State: state, ExitCode: code}
	}
	in := status.Input{Pod: pod, Sandbox: true, Containers: []podspec.ContainerStatus{
		ran("init", "c1", podspec.StateExited, 0), ran("sidecar", "c2", podspec.StateRunning, 0),
		ran("source", "c3", podspec.StateExited, 42), ran("regular", "c4", podspec.StateRunning, 0),
	}, Probe: func(*v1.Container, string) (bool, bool) { return true, true }}
	s := status.Generate(in)
	if s.Phase != v1.PodRunning {
		t.Errorf("phase %s, want Running", s.Phase)
	}
	c := s.Conditions[len(s.Conditions)-1]
	if c.Type != v1.AllContainersRestarting || c.Status != v1.ConditionTrue || c.Reason != "RestartAllContainersStarted" ||
		!strings.Contains(c.Message, "restart policy rule") {
		t.Errorf("condition %+v", c)
	}
	// Another exit code: the source is done for good, the pod still runs.
	in.Containers[2].ExitCode = 1
	if s := status.Generate(in); s.Conditions[len(s.Conditions)-1].Status != v1.ConditionFalse {
		t.Errorf("exit 1: %+v", s.Conditions[len(s.Conditions)-1])
	}
	// A pod without a RestartAllContainers rule has no such condition.
	plain := testPod("web", "u1", v1.RestartPolicyNever, ctr("a", "busybox")).Pod
	if s := status.Generate(status.Input{Pod: plain}); slices.ContainsFunc(s.Conditions, func(c v1.PodCondition) bool {
		return c.Type == v1.AllContainersRestarting
	}) {
		t.Errorf("condition on a pod without rules: %+v", s.Conditions)
	}
}

// A container that exits so at once again does not churn the pod: the
// first reset is at once, the next waits the container's crash-loop
// back-off (10s), where the kubelet would go again at once.
func TestRestartAllContainersBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, restartAllOn(ctr("source", "busybox"), 42), ctr("regular", "busybox"))})
		rt.Exit("c1", 42)
		synctest.Wait()
		if got, want := rt.Calls("start"), []string{"start u1/source#0", "start u1/regular#0", "start u1/source#1", "start u1/regular#1"}; !slices.Equal(got, want) {
			t.Fatalf("first reset: starts %q, want %q", got, want)
		}
		rt.Exit("c3", 42)
		synctest.Wait()
		if got := rt.Calls("destroy"); len(got) != 2 {
			t.Fatalf("second reset at once: %q", got)
		}
		if c := condition(h.pod("web"), v1.AllContainersRestarting); c.Status != v1.ConditionTrue {
			t.Errorf("waiting to restart all: %+v", c)
		}
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if got := rt.Calls("destroy"); len(got) != 2 {
			t.Fatalf("second reset before its back-off: %q", got)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := rt.Calls("start"); len(got) != 6 || got[4] != "start u1/source#2" {
			t.Fatalf("second reset after 10s: starts %q", got)
		}
	})
}
