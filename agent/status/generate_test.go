package status

import (
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestPodPhase(t *testing.T) {
	run := v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	ok := v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}}
	bad := v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}}
	creating := v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: ContainerCreating}}}
	crashloop := v1.ContainerStatus{
		State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: CrashLoopBackOff}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}},
	}
	started := run
	started.Started = new(true)
	unstarted := run
	unstarted.Started = new(false)
	for _, tc := range []struct {
		name     string
		policy   v1.RestartPolicy
		init     []v1.ContainerStatus
		ctrs     []v1.ContainerStatus
		want     v1.PodPhase
		sidecars int // the first init containers are sidecars
	}{
		{"sidecar started, main running", v1.RestartPolicyAlways, []v1.ContainerStatus{started}, []v1.ContainerStatus{run}, v1.PodRunning, 1},
		{"sidecar not started yet", v1.RestartPolicyAlways, []v1.ContainerStatus{unstarted}, nil, v1.PodPending, 1},
		{"sidecar crash looping after start-up", v1.RestartPolicyAlways, []v1.ContainerStatus{crashloop}, []v1.ContainerStatus{run}, v1.PodRunning, 1},
		{"main done, sidecar still running, Never", v1.RestartPolicyNever, []v1.ContainerStatus{started}, []v1.ContainerStatus{ok}, v1.PodRunning, 1},
		{"main done, sidecar stopped, Never", v1.RestartPolicyNever, []v1.ContainerStatus{bad}, []v1.ContainerStatus{ok}, v1.PodSucceeded, 1},
		{"not started", v1.RestartPolicyAlways, nil, []v1.ContainerStatus{creating}, v1.PodPending, 0},
		{"one of two started", v1.RestartPolicyAlways, nil, []v1.ContainerStatus{run, creating}, v1.PodPending, 0},
		{"running", v1.RestartPolicyAlways, nil, []v1.ContainerStatus{run, run}, v1.PodRunning, 0},
		{"crash looping counts as running", v1.RestartPolicyAlways, nil, []v1.ContainerStatus{crashloop}, v1.PodRunning, 0},
		{"init running", v1.RestartPolicyAlways, []v1.ContainerStatus{run}, []v1.ContainerStatus{creating}, v1.PodPending, 0},
		{"init failed, Never", v1.RestartPolicyNever, []v1.ContainerStatus{bad}, []v1.ContainerStatus{creating}, v1.PodFailed, 0},
		{"init failed, OnFailure", v1.RestartPolicyOnFailure, []v1.ContainerStatus{bad}, []v1.ContainerStatus{creating}, v1.PodPending, 0},
		{"all succeeded, OnFailure", v1.RestartPolicyOnFailure, nil, []v1.ContainerStatus{ok, ok}, v1.PodSucceeded, 0},
		{"one failed, Never", v1.RestartPolicyNever, nil, []v1.ContainerStatus{ok, bad}, v1.PodFailed, 0},
		{"one failed, OnFailure: restarting", v1.RestartPolicyOnFailure, nil, []v1.ContainerStatus{ok, bad}, v1.PodRunning, 0},
		{"one still running, Never", v1.RestartPolicyNever, nil, []v1.ContainerStatus{ok, run}, v1.PodRunning, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: tc.policy}}
			pod.Spec.Containers = make([]v1.Container, len(tc.ctrs))
			pod.Spec.InitContainers = make([]v1.Container, len(tc.init))
			for i := range tc.sidecars {
				pod.Spec.InitContainers[i].RestartPolicy = new(v1.ContainerRestartPolicyAlways)
			}
			// A regular container made: the pod is initialized.
			initialized := slices.ContainsFunc(tc.ctrs, func(c v1.ContainerStatus) bool {
				return c.State.Waiting == nil || c.State.Waiting.Reason != ContainerCreating
			})
			s := v1.PodStatus{InitContainerStatuses: tc.init, ContainerStatuses: tc.ctrs}
			if got := Phase(pod, s, initialized); got != tc.want {
				t.Errorf("phase = %s, want %s", got, tc.want)
			}
		})
	}
}

// A container that was made but is not known to run (its monitor had not yet
// said so when a daemon died) is not reported running and ready.
func TestCreatedContainerIsNotReady(t *testing.T) {
	pod := &v1.Pod{Spec: v1.PodSpec{Containers: []v1.Container{{Name: "a"}}}}
	s := Generate(Input{Pod: pod, Containers: []podspec.ContainerStatus{{ID: "c1", Name: "a", State: podspec.StateCreated}}})
	cs := s.ContainerStatuses[0]
	if cs.State.Waiting == nil || cs.State.Waiting.Reason != "ContainerCreating" || cs.State.Running != nil || cs.Ready || *cs.Started {
		t.Errorf("status of a created container = %+v, ready %v", cs.State, cs.Ready)
	}
}

// LatestIndex picks the instance LatestByName does: the highest attempt,
// the newest created on a tie, the first of equals.
func TestLatestIndex(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(int64(s), 0) }
	cs := []podspec.ContainerStatus{
		{ID: "a0", Name: "a", Attempt: 0, CreatedAt: at(1)},
		{ID: "b1", Name: "b", Attempt: 1, CreatedAt: at(1)},
		{ID: "a2", Name: "a", Attempt: 2, CreatedAt: at(2)},
		{ID: "a2b", Name: "a", Attempt: 2, CreatedAt: at(3)},
		{ID: "a1", Name: "a", Attempt: 1, CreatedAt: at(9)},
		{ID: "b1b", Name: "b", Attempt: 1, CreatedAt: at(1)},
	}
	latest := LatestByName(cs)
	for _, name := range []string{"a", "b", "c"} {
		i := LatestIndex(cs, name)
		l, ok := latest[name]
		if (i >= 0) != ok || ok && cs[i].ID != l.ID {
			t.Errorf("LatestIndex(%s) = %d, LatestByName has %q (%v)", name, i, l.ID, ok)
		}
	}
	if i := LatestIndex(cs, "a"); i != 3 {
		t.Errorf("LatestIndex(a) = %d, want 3", i)
	}
}
