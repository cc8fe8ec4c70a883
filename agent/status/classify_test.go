package status

import (
	"reflect"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func running(name string, ready bool) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, Ready: ready, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
}

func waiting(name, reason, msg string, restarts int32) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name, RestartCount: restarts,
		State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reason, Message: msg}}}
}

func exited(name string, code int32, reason, msg string) v1.ContainerStatus {
	return v1.ContainerStatus{Name: name,
		State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: code, Reason: reason, Message: msg}}}
}

type podOpt func(*v1.Pod)

func phase(ph v1.PodPhase) podOpt { return func(p *v1.Pod) { p.Status.Phase = ph } }
func policy(r v1.RestartPolicy) podOpt {
	return func(p *v1.Pod) { p.Spec.RestartPolicy = r }
}
func ctrs(cs ...v1.ContainerStatus) podOpt {
	return func(p *v1.Pod) { p.Status.ContainerStatuses = cs }
}
func inits(n int, cs ...v1.ContainerStatus) podOpt {
	return func(p *v1.Pod) {
		p.Spec.InitContainers = make([]v1.Container, n)
		p.Status.InitContainerStatuses = cs
	}
}
func readyCond(s v1.ConditionStatus) podOpt {
	return func(p *v1.Pod) {
		p.Status.Conditions = []v1.PodCondition{{Type: v1.ContainersReady, Status: v1.ConditionTrue}, {Type: v1.PodReady, Status: s}}
	}
}
func reason(r string) podOpt { return func(p *v1.Pod) { p.Status.Reason = r } }
func deleted(p *v1.Pod)      { p.DeletionTimestamp = &metav1.Time{} }

func pod(opts ...podOpt) *v1.Pod {
	p := &v1.Pod{}
	for _, o := range opts {
		o(p)
	}
	return p
}

// TestClassify covers each branch the four readers switch on: run --once
// (Stuck, Phase, Finishes, Running, Message), --ready-when (Phase, Up, Ready,
// Containers), the STATUS line (Waiting, Phase) and ps (Display).
func TestClassify(t *testing.T) {
	for _, tc := range []struct {
		name string
		pod  *v1.Pod
		want Class
	}{
		{"no status yet", pod(), Class{Up: true, Display: ""}},
		{"Always, running and ready", pod(phase(v1.PodRunning), ctrs(running("a", true)), readyCond(v1.ConditionTrue)),
			Class{Phase: v1.PodRunning, Running: true, Up: true, Ready: true, Display: "Running",
				Containers: []Container{{Name: "a", Running: true, Ready: true}}}},
		{"running, PodReady false", pod(phase(v1.PodRunning), ctrs(running("a", false)), readyCond(v1.ConditionFalse)),
			Class{Phase: v1.PodRunning, Running: true, Up: true, Display: "Running",
				Containers: []Container{{Name: "a", Running: true}}}},
		{"unset policy is Always", pod(policy(""), phase(v1.PodRunning), ctrs(running("a", true))),
			Class{Phase: v1.PodRunning, Running: true, Up: true, Display: "Running",
				Containers: []Container{{Name: "a", Running: true, Ready: true}}}},
		{"Never finishes", pod(policy(v1.RestartPolicyNever), phase(v1.PodRunning), ctrs(running("a", true))),
			Class{Phase: v1.PodRunning, Finishes: true, Running: true, Up: true, Display: "Running",
				Containers: []Container{{Name: "a", Running: true, Ready: true}}}},
		{"OnFailure finishes", pod(policy(v1.RestartPolicyOnFailure), phase(v1.PodPending)),
			Class{Phase: v1.PodPending, Finishes: true, Up: true, Display: "Pending"}},
		{"being created: waits its turn", pod(phase(v1.PodPending), ctrs(waiting("a", ContainerCreating, "", 0))),
			Class{Phase: v1.PodPending, Display: ContainerCreating,
				Containers: []Container{{Name: "a", Waiting: ContainerCreating}}}},
		{"one of two running", pod(phase(v1.PodPending), ctrs(running("a", true), waiting("b", ContainerCreating, "", 0))),
			Class{Phase: v1.PodPending, Display: ContainerCreating,
				Containers: []Container{{Name: "a", Running: true, Ready: true}, {Name: "b", Waiting: ContainerCreating}}}},
		{"crash loop", pod(phase(v1.PodRunning), ctrs(waiting("a", CrashLoopBackOff, "back-off 10s", 2))),
			Class{Phase: v1.PodRunning, Message: "a: CrashLoopBackOff: back-off 10s", Waiting: CrashLoopBackOff, Display: CrashLoopBackOff,
				Containers: []Container{{Name: "a", Waiting: CrashLoopBackOff, Hopeless: true, Restarts: 2}}}},
		{"image never pulled is stuck", pod(phase(v1.PodPending), ctrs(running("a", true), waiting("b", ErrImageNeverPull, "not present", 0))),
			Class{Phase: v1.PodPending, Stuck: "b: ErrImageNeverPull: not present", Message: "b: ErrImageNeverPull: not present",
				Waiting: ErrImageNeverPull, Display: ErrImageNeverPull,
				Containers: []Container{{Name: "a", Running: true, Ready: true}, {Name: "b", Waiting: ErrImageNeverPull, Hopeless: true}}}},
		{"config error is stuck, empty message kept", pod(phase(v1.PodPending), ctrs(waiting("a", CreateContainerConfigError, "", 0))),
			Class{Phase: v1.PodPending, Stuck: "a: CreateContainerConfigError: ", Message: "a: CreateContainerConfigError",
				Waiting: CreateContainerConfigError, Display: CreateContainerConfigError,
				Containers: []Container{{Name: "a", Waiting: CreateContainerConfigError, Hopeless: true}}}},
		{"image pull back-off is hopeless, not stuck", pod(phase(v1.PodPending), ctrs(waiting("a", ImagePullBackOff, "", 0))),
			Class{Phase: v1.PodPending, Message: "a: ImagePullBackOff", Waiting: ImagePullBackOff, Display: ImagePullBackOff,
				Containers: []Container{{Name: "a", Waiting: ImagePullBackOff, Hopeless: true}}}},
		{"a reason that passes, after a restart", pod(phase(v1.PodRunning), ctrs(waiting("a", "PostStartHookError", "", 1))),
			Class{Phase: v1.PodRunning, Message: "a: PostStartHookError", Waiting: "PostStartHookError", Display: "PostStartHookError",
				Containers: []Container{{Name: "a", Waiting: "PostStartHookError", Restarts: 1}}}},
		{"waiting without a reason stops the STATUS line's search", pod(phase(v1.PodRunning),
			ctrs(waiting("a", "", "", 0), waiting("b", CrashLoopBackOff, "", 1))),
			Class{Phase: v1.PodRunning, Message: "a: ", Display: CrashLoopBackOff,
				Containers: []Container{{Name: "a"}, {Name: "b", Waiting: CrashLoopBackOff, Hopeless: true, Restarts: 1}}}},
		{"terminated between restarts is up", pod(phase(v1.PodRunning), ctrs(running("a", true), exited("b", 1, "Error", "boom"))),
			Class{Phase: v1.PodRunning, Up: true, Message: "b: Error: boom", Display: "Error",
				Containers: []Container{{Name: "a", Running: true, Ready: true}, {Name: "b"}}}},
		{"a sidecar-like finished container next to a ready one", pod(phase(v1.PodRunning), ctrs(running("a", true), exited("b", 0, "Completed", ""))),
			Class{Phase: v1.PodRunning, Up: true, Display: "Running",
				Containers: []Container{{Name: "a", Running: true, Ready: true}, {Name: "b"}}}},
		{"terminated without a reason", pod(phase(v1.PodRunning), ctrs(exited("a", 137, "", ""))),
			Class{Phase: v1.PodRunning, Up: true, Message: "a: ", Display: "ExitCode:137",
				Containers: []Container{{Name: "a"}}}},
		{"succeeded", pod(policy(v1.RestartPolicyNever), phase(v1.PodSucceeded), ctrs(exited("a", 0, "Completed", ""))),
			Class{Phase: v1.PodSucceeded, Finishes: true, Up: true, Display: "Completed",
				Containers: []Container{{Name: "a"}}}},
		{"failed by its containers", pod(policy(v1.RestartPolicyNever), phase(v1.PodFailed), ctrs(exited("a", 3, "Error", ""))),
			Class{Phase: v1.PodFailed, Finishes: true, Up: true, Message: "a: Error", Display: "Error",
				Containers: []Container{{Name: "a"}}}},
		{"evicted", pod(phase(v1.PodFailed), reason(Evicted), ctrs(exited("a", 137, "Error", ""))),
			Class{Phase: v1.PodFailed, Reason: Evicted, Up: true, Message: "a: Error", Display: Evicted,
				Containers: []Container{{Name: "a"}}}},
		{"deadline exceeded", pod(phase(v1.PodFailed), reason(DeadlineExceeded)),
			Class{Phase: v1.PodFailed, Reason: DeadlineExceeded, Up: true, Display: DeadlineExceeded}},
		{"a reason without Failed is not the pod's", pod(phase(v1.PodRunning), reason(Evicted), ctrs(running("a", true))),
			Class{Phase: v1.PodRunning, Running: true, Up: true, Display: "Running",
				Containers: []Container{{Name: "a", Running: true, Ready: true}}}},
		{"terminating", pod(deleted, phase(v1.PodRunning), ctrs(running("a", true))),
			Class{Phase: v1.PodRunning, Terminating: true, Running: true, Up: true, Display: "Terminating",
				Containers: []Container{{Name: "a", Running: true, Ready: true}}}},
		{"init container running", pod(phase(v1.PodPending), inits(2, exited("i0", 0, "Completed", ""), running("i1", false)),
			ctrs(waiting("a", PodInitializing, "", 0))),
			Class{Phase: v1.PodPending, Display: "Init:1/2",
				Containers: []Container{{Name: "a", Waiting: PodInitializing}}}},
		{"init container failed", pod(phase(v1.PodPending), inits(1, exited("i0", 1, "Error", "x"))),
			Class{Phase: v1.PodPending, Up: true, Message: "i0: Error: x", Display: "Init:Error"}},
		{"init container failed without a reason", pod(phase(v1.PodPending), inits(1, exited("i0", 2, "", ""))),
			Class{Phase: v1.PodPending, Up: true, Message: "i0: ", Display: "Init:ExitCode:2"}},
		{"init container stuck", pod(phase(v1.PodPending), inits(1, waiting("i0", ErrImageNeverPull, "gone", 0))),
			Class{Phase: v1.PodPending, Up: true, Stuck: "i0: ErrImageNeverPull: gone", Message: "i0: ErrImageNeverPull: gone",
				Waiting: ErrImageNeverPull, Display: "Init:ErrImageNeverPull"}},
		{"init container waiting its turn", pod(phase(v1.PodPending), inits(1, waiting("i0", PodInitializing, "", 0))),
			Class{Phase: v1.PodPending, Up: true, Display: "Init:0/1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Classify(tc.pod); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Classify:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}
