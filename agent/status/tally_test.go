package status

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testNode is the suffix of the static pods' names in these tests.
const testNode = "node1"

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
		{[]v1.Pod{pod("api", v1.PodRunning, ""), pod("etcd", v1.PodRunning, CrashLoopBackOff), pod("sched", v1.PodRunning, "")}, 0,
			"3 pods: 2 running, 1 waiting (etcd: CrashLoopBackOff)"},
		{[]v1.Pod{pod("a", v1.PodPending, ContainerCreating), pod("b", v1.PodSucceeded, ""), pod("c", v1.PodFailed, "")}, 2,
			"3 pods: 1 pending, 1 succeeded, 1 failed; 2 manifest problems"},
		{[]v1.Pod{pod("a", v1.PodPending, ErrImageNeverPull), pod("b", v1.PodRunning, CrashLoopBackOff)}, 0,
			"2 pods: 2 waiting (a: ErrImageNeverPull, b: CrashLoopBackOff)"},
	} {
		if got := Summarize(tc.pods, testNode, tc.problems); got != tc.want {
			t.Errorf("Summarize = %q, want %q", got, tc.want)
		}
	}
}
