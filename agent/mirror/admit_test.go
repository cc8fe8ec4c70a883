package mirror

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"

	"github.com/staticpodd/staticpodd/agent/events"
)

// apiPod is a pod made through the API server, bound to node and scheduled.
func apiPod(name, node string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID("uid-" + name), ResourceVersion: "7", Generation: 1},
		Spec:       v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status: v1.PodStatus{Phase: v1.PodPending, QOSClass: v1.PodQOSBestEffort, Conditions: []v1.PodCondition{
			{Type: v1.PodScheduled, Status: v1.ConditionTrue},
			{Type: v1.DisruptionTarget, Status: v1.ConditionFalse, Reason: "someone's"},
		}},
	}
}

func getPod(client kubernetes.Interface, name string) *v1.Pod {
	p, err := client.CoreV1().Pods("default").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

// A pod the API server binds to the node is failed as the kubelet's rejectPod
// fails one, with an event; mirror pods and the pods of other nodes are not
// touched; a pod being deleted is failed and deleted.
func TestPodsBoundToTheNodeAreRejected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mirror := apiPod("web-node1", "node1")
		mirror.Namespace = "kube-system"
		mirror.Annotations = map[string]string{AnnotationMirror: "h1"}
		mirror.Status.Phase = v1.PodRunning
		deleting := apiPod("going", "node1")
		deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
		client := fake.NewClientset(apiPod("ds-pod", "node1"), apiPod("elsewhere", "node2"), mirror, deleting)
		pods := newFakePods()
		pods.set("kube-system/web-node1", staticPod("h1", v1.PodRunning))
		start(t, client, pods)

		var got *v1.Pod
		eventually(t, "the pod bound to the node failed", func() bool {
			got = getPod(client, "ds-pod")
			return got.Status.Phase == v1.PodFailed
		})
		want := "Pod was rejected: " + rejectMessage("node1")
		if got.Status.Reason != events.StaticPodsOnly || got.Status.Message != want {
			t.Errorf("reason %q message %q, want %q %q", got.Status.Reason, got.Status.Message, events.StaticPodsOnly, want)
		}
		if got.Status.StartTime == nil || got.Status.QOSClass != v1.PodQOSBestEffort || got.Status.ObservedGeneration != 1 {
			t.Errorf("startTime %v qosClass %q observedGeneration %d", got.Status.StartTime, got.Status.QOSClass, got.Status.ObservedGeneration)
		}
		// The kubelet's conditions go, as its rejectPod's status manager
		// sends them; the others stay.
		if len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != v1.DisruptionTarget {
			t.Errorf("conditions %+v, want only DisruptionTarget", got.Status.Conditions)
		}
		eventually(t, "the pod being deleted gone", func() bool { return getPod(client, "going") == nil })
		eventually(t, "the events posted", func() bool {
			evs, err := client.CoreV1().Events("default").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, ev := range evs.Items {
				if ev.Reason == events.StaticPodsOnly && ev.Type == v1.EventTypeWarning && ev.InvolvedObject.Kind == "Pod" &&
					ev.Source.Host == "node1" && ev.Message == rejectMessage("node1") {
					n++
				}
			}
			return n == 2
		})
		// Not kept by the agent: a flood would push the static pods'
		// events out of its ring.
		for _, ev := range pods.rec.List() {
			if ev.Reason == events.StaticPodsOnly {
				t.Errorf("kept in the agent's ring: %+v", ev)
			}
		}
		if p := getPod(client, "elsewhere"); p.Status.Phase != v1.PodPending {
			t.Errorf("another node's pod: phase %s", p.Status.Phase)
		}
		if p := getMirror(client); p == nil || p.UID != mirror.UID || p.Status.Phase != v1.PodRunning {
			t.Errorf("the mirror pod: %+v", p)
		}
		// A pod bound later, through the watch, likewise.
		if _, err := client.CoreV1().Pods("default").Create(context.Background(), apiPod("later", "node1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the pod bound later failed", func() bool { return getPod(client, "later").Status.Phase == v1.PodFailed })
	})
}

// Thousands of pods bound to the node: the rejecter holds at most
// maxRejectQueue of them at once, and fails every one all the same (those it
// dropped, after a new list).
func TestManyPodsBoundToTheNodeHoldBoundedMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 2*maxRejectQueue + 1
		client := fake.NewClientset()
		for i := range n {
			if _, err := client.CoreV1().Pods("default").Create(context.Background(), apiPod(fmt.Sprintf("p%d", i), "node1"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		m := start(t, client, newFakePods())
		most := 0
		deadline := time.Now().Add(2 * n / rejectQPS * time.Second)
		for {
			m.podsMu.Lock()
			ps := m.sync
			m.podsMu.Unlock()
			if ps != nil {
				ps.rejects.mu.Lock()
				most = max(most, len(ps.rejects.queued), len(ps.rejects.queue))
				ps.rejects.mu.Unlock()
			}
			list, err := client.CoreV1().Pods("default").List(context.Background(), metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			failed := 0
			for _, p := range list.Items {
				if p.Status.Phase == v1.PodFailed {
					failed++
				}
			}
			if failed == n {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%d of %d pods failed", failed, n)
			}
			time.Sleep(5 * time.Second)
		}
		if most > maxRejectQueue {
			t.Errorf("the rejecter held %d pods at once, more than %d", most, maxRejectQueue)
		}
		if most == 0 {
			t.Error("never saw the rejecter hold a pod")
		}
	})
}

// The Node is registered unschedulable, and marked so again when someone
// makes it schedulable; its allocatable pods are its static pods still
// running, which the scheduler counts.
func TestNodeUnschedulable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		pods := newFakePods()
		pods.set("kube-system/web-node1", staticPod("h1", v1.PodRunning))
		done := staticPod("h2", v1.PodSucceeded)
		done.Name = "job-node1"
		pods.set("kube-system/job-node1", done)
		start(t, client, pods)
		node := func() *v1.Node {
			n, err := client.CoreV1().Nodes().Get(context.Background(), "node1", metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		eventually(t, "the node registered", func() bool { return node() != nil })
		if !node().Spec.Unschedulable {
			t.Fatal("the node was registered schedulable")
		}
		if got := node().Status.Allocatable[v1.ResourcePods]; got.Value() != 1 {
			t.Errorf("allocatable pods %s, want 1: the static pod running", got.String())
		}
		if _, err := client.CoreV1().Nodes().Patch(context.Background(), "node1", types.StrategicMergePatchType,
			[]byte(`{"spec":{"unschedulable":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// At the next status update, NodeStatusUpdateFrequency later.
		time.Sleep(10 * time.Second)
		eventually(t, "the node unschedulable again", func() bool { return node().Spec.Unschedulable })
		eventually(t, "the NodeNotSchedulable event", func() bool {
			for _, ev := range pods.rec.List() {
				if ev.Reason == events.NodeNotSchedulable && ev.InvolvedObject.Kind == "Node" && strings.Contains(ev.Message, "node1") {
					return true
				}
			}
			return false
		})
	})
}

// With --register-schedulable=true the Node is registered schedulable and
// left so, as the kubelet registers its own.
func TestNodeRegisteredSchedulable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		startWith(t, Config{NodeName: "node1", RegisterNode: true, RegisterSchedulable: true, Version: "test"}, client, newFakePods())
		var n *v1.Node
		eventually(t, "the node registered", func() bool {
			n, _ = client.CoreV1().Nodes().Get(context.Background(), "node1", metav1.GetOptions{})
			return n != nil && n.Name != ""
		})
		if n.Spec.Unschedulable {
			t.Fatal("the node was registered unschedulable")
		}
		// Two status updates later it is still schedulable.
		time.Sleep(20 * time.Second)
		if n, _ = client.CoreV1().Nodes().Get(context.Background(), "node1", metav1.GetOptions{}); n.Spec.Unschedulable {
			t.Error("the node was cordoned")
		}
	})
}

// A refused status patch is tried again, after its back-off, and the failure
// shows in the mirror's status meanwhile.
func TestRejectionRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset(apiPod("ds-pod", "node1"))
		refused := 0
		client.PrependReactor("patch", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
			if a.GetSubresource() == "status" && refused < 2 {
				refused++
				return true, nil, apierrors.NewInternalError(errors.New("etcd is away"))
			}
			return false, nil, nil
		})
		m := start(t, client, newFakePods())
		eventually(t, "the refusal reported", func() bool {
			_, err := m.Status()
			return err != nil && strings.Contains(err.Error(), "etcd is away")
		})
		eventually(t, "the pod failed at the third try", func() bool { return getPod(client, "ds-pod").Status.Phase == v1.PodFailed })
		if _, err := m.Status(); err != nil {
			t.Errorf("status after the pod failed: %v", err)
		}
	})
}
