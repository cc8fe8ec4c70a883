package agent

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestPodPhase(t *testing.T) {
	run := v1.ContainerStatus{State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	ok := v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 0}}}
	bad := v1.ContainerStatus{State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}}}
	creating := v1.ContainerStatus{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reasonCreating}}}
	crashloop := v1.ContainerStatus{
		State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reasonCrashLoop}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1}},
	}
	for _, tc := range []struct {
		name   string
		policy v1.RestartPolicy
		init   []v1.ContainerStatus
		ctrs   []v1.ContainerStatus
		want   v1.PodPhase
	}{
		{"not started", v1.RestartPolicyAlways, nil, []v1.ContainerStatus{creating}, v1.PodPending},
		{"one of two started", v1.RestartPolicyAlways, nil, []v1.ContainerStatus{run, creating}, v1.PodPending},
		{"running", v1.RestartPolicyAlways, nil, []v1.ContainerStatus{run, run}, v1.PodRunning},
		{"crash looping counts as running", v1.RestartPolicyAlways, nil, []v1.ContainerStatus{crashloop}, v1.PodRunning},
		{"init running", v1.RestartPolicyAlways, []v1.ContainerStatus{run}, []v1.ContainerStatus{creating}, v1.PodPending},
		{"init failed, Never", v1.RestartPolicyNever, []v1.ContainerStatus{bad}, []v1.ContainerStatus{creating}, v1.PodFailed},
		{"init failed, OnFailure", v1.RestartPolicyOnFailure, []v1.ContainerStatus{bad}, []v1.ContainerStatus{creating}, v1.PodPending},
		{"all succeeded, OnFailure", v1.RestartPolicyOnFailure, nil, []v1.ContainerStatus{ok, ok}, v1.PodSucceeded},
		{"one failed, Never", v1.RestartPolicyNever, nil, []v1.ContainerStatus{ok, bad}, v1.PodFailed},
		{"one failed, OnFailure: restarting", v1.RestartPolicyOnFailure, nil, []v1.ContainerStatus{ok, bad}, v1.PodRunning},
		{"one still running, Never", v1.RestartPolicyNever, nil, []v1.ContainerStatus{ok, run}, v1.PodRunning},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("p", "u", tc.policy).Pod
			pod.Spec.Containers = make([]v1.Container, len(tc.ctrs))
			s := v1.PodStatus{InitContainerStatuses: tc.init, ContainerStatuses: tc.ctrs}
			if got := podPhase(pod, s); got != tc.want {
				t.Errorf("phase = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	pod := func(name string, phase v1.PodPhase, waiting string) v1.Pod {
		p := v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + testNode}, Status: v1.PodStatus{Phase: phase}}
		if waiting != "" {
			p.Status.ContainerStatuses = []v1.ContainerStatus{{State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: waiting}}}}
		}
		return p
	}
	for _, tc := range []struct {
		pods     []v1.Pod
		problems int
		want     string
	}{
		{nil, 0, "0 pods"},
		{[]v1.Pod{pod("web", v1.PodRunning, "")}, 0, "1 pod: 1 running"},
		{[]v1.Pod{pod("api", v1.PodRunning, ""), pod("etcd", v1.PodRunning, reasonCrashLoop), pod("sched", v1.PodRunning, "")}, 0,
			"3 pods: 2 running, 1 waiting (etcd: CrashLoopBackOff)"},
		{[]v1.Pod{pod("a", v1.PodPending, reasonCreating), pod("b", v1.PodSucceeded, ""), pod("c", v1.PodFailed, "")}, 2,
			"3 pods: 1 pending, 1 succeeded, 1 failed; 2 manifest problems"},
		{[]v1.Pod{pod("a", v1.PodPending, reasonImageNeverPull), pod("b", v1.PodRunning, reasonCrashLoop)}, 0,
			"2 pods: 2 waiting (a: ErrImageNeverPull, b: CrashLoopBackOff)"},
	} {
		if got := summarize(tc.pods, testNode, tc.problems); got != tc.want {
			t.Errorf("summarize = %q, want %q", got, tc.want)
		}
	}
}
