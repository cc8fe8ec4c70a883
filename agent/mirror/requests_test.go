package mirror

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
)

// At steady state a node asks the API server what the kubelet asks: a
// Lease update every 10 s and nothing else within a minute (the Node read
// from its watch, its unchanged status posted every 5 minutes, mirror pods
// whose status does not change left alone), as make bench-apireqs counts
// against the real kubelet.
func TestSteadyStateRequests(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		pods := newFakePods()
		pods.set("kube-system/web-node1", staticPod("h1", v1.PodRunning))
		start(t, client, pods)
		eventually(t, "the mirror pod with its status", func() bool {
			p := getMirror(client)
			return p != nil && p.Status.Phase == v1.PodRunning
		})
		eventually(t, "the lease", func() bool {
			_, err := client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(context.Background(), "node1", metav1.GetOptions{})
			return err == nil
		})
		time.Sleep(30 * time.Second)
		synctest.Wait()
		client.ClearActions()
		time.Sleep(time.Minute)
		synctest.Wait()
		got := map[string]int{}
		for _, a := range client.Actions() {
			res := a.GetResource().Resource
			if s := a.GetSubresource(); s != "" {
				res += "/" + s
			}
			got[a.GetVerb()+" "+res]++
		}
		if n := got["update leases"]; n != 6 {
			t.Errorf("%d lease updates in a minute, want 6 (one every 10 s)", n)
		}
		delete(got, "update leases")
		if len(got) > 0 {
			t.Errorf("requests in a minute at steady state besides the lease's: %v, want none", got)
		}
	})
}

// The Lease is updated from the one last written, without reading it
// first; when someone else wrote it meanwhile (a conflict) it is read
// again and the renewal made from that, in the same round.
func TestLeaseRenewedFromTheLastWritten(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		start(t, client, newFakePods())
		leases := client.CoordinationV1().Leases(v1.NamespaceNodeLease)
		var first *coordinationv1.Lease
		eventually(t, "the lease", func() bool {
			l, err := leases.Get(context.Background(), "node1", metav1.GetOptions{})
			first = l
			return err == nil
		})
		// Someone else writes it: the next renewal's update conflicts.
		conflict := true
		client.PrependReactor("update", "leases", func(ktesting.Action) (bool, runtime.Object, error) {
			if conflict {
				conflict = false
				return true, nil, apierrors.NewConflict(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "node1", errors.New("the object has been modified"))
			}
			return false, nil, nil
		})
		client.ClearActions()
		time.Sleep(11 * time.Second)
		synctest.Wait()
		var verbs []string
		for _, a := range client.Actions() {
			if a.GetResource().Resource == "leases" {
				verbs = append(verbs, a.GetVerb())
			}
		}
		if want := []string{"update", "get", "update"}; !slices.Equal(verbs, want) {
			t.Errorf("lease requests of a renewal that conflicted: %v, want %v", verbs, want)
		}
		l, err := leases.Get(context.Background(), "node1", metav1.GetOptions{})
		if err != nil || !l.Spec.RenewTime.After(first.Spec.RenewTime.Time) {
			t.Errorf("lease not renewed after the conflict: %v %v", l, err)
		}
		if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].Kind != "Node" {
			t.Errorf("lease owner references %v, want the Node", l.OwnerReferences)
		}
	})
}

// A Node deleted is registered again at the next status round, as the
// watch tells it gone.
func TestNodeDeletedRegisteredAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		start(t, client, newFakePods())
		nodes := client.CoreV1().Nodes()
		eventually(t, "the node registered", func() bool {
			_, err := nodes.Get(context.Background(), "node1", metav1.GetOptions{})
			return err == nil
		})
		if err := nodes.Delete(context.Background(), "node1", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		eventually(t, "the node registered again", func() bool {
			n, err := nodes.Get(context.Background(), "node1", metav1.GetOptions{})
			return err == nil && n.Status.NodeInfo.KubeletVersion == KubeletVersion
		})
	})
}

// While the Node cannot be watched, the status loop reads it itself: a
// Node made schedulable is still cordoned again.
func TestNodeReadWithoutItsWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		client.PrependWatchReactor("nodes", func(ktesting.Action) (bool, watch.Interface, error) {
			return true, nil, errors.New("watch refused")
		})
		m := start(t, client, newFakePods())
		nodes := client.CoreV1().Nodes()
		eventually(t, "the node registered", func() bool {
			_, err := nodes.Get(context.Background(), "node1", metav1.GetOptions{})
			return err == nil
		})
		if _, err := nodes.Patch(context.Background(), "node1", types.StrategicMergePatchType,
			[]byte(`{"spec":{"unschedulable":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		eventually(t, "the node unschedulable again", func() bool {
			n, err := nodes.Get(context.Background(), "node1", metav1.GetOptions{})
			return err == nil && n.Spec.Unschedulable
		})
		if _, err := m.Status(); err == nil || !strings.Contains(err.Error(), "node watch") {
			t.Errorf("status %v, want the node watch's failure", err)
		}
	})
}

// A watch of the node's pods that ends (its timeout) is followed by another
// from the last resourceVersion it saw, without a list, as the reflector
// watches again: the pods are listed once.
func TestMirrorPodWatchResumesWithoutAList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		first := watch.NewFake()
		var mu sync.Mutex
		var watches []string // the resourceVersion each watch asked from
		client.PrependWatchReactor("pods", func(a ktesting.Action) (bool, watch.Interface, error) {
			mu.Lock()
			defer mu.Unlock()
			watches = append(watches, a.(ktesting.WatchAction).GetWatchRestrictions().ResourceVersion)
			if len(watches) == 1 {
				return true, first, nil
			}
			return true, watch.NewFake(), nil
		})
		start(t, client, newFakePods())
		eventually(t, "the first watch", func() bool { mu.Lock(); defer mu.Unlock(); return len(watches) == 1 })
		first.Action(watch.Bookmark, &v1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "42"}})
		time.Sleep(time.Minute)
		first.Stop()
		eventually(t, "the second watch", func() bool { mu.Lock(); defer mu.Unlock(); return len(watches) == 2 })
		mu.Lock()
		if watches[1] != "42" {
			t.Errorf("the second watch is from resourceVersion %q, want the bookmark's 42", watches[1])
		}
		mu.Unlock()
		lists := 0
		for _, a := range client.Actions() {
			if a.GetVerb() == "list" && a.GetResource().Resource == "pods" {
				lists++
			}
		}
		if lists != 1 {
			t.Errorf("the node's pods listed %d times, want once", lists)
		}
	})
}

// An API server restored from a backup (etcd's) gives the Node again with
// an older resourceVersion: the list after the watch's "too old" error is
// the Node as it is now, and replaces the one known however newer that
// looked, as the reflector's Replace does. Here the restored Node is
// schedulable again, and is cordoned again.
func TestNodeRelistedAfterARestoreReplacesTheKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		first := watch.NewFake()
		var mu sync.Mutex
		watches := 0
		client.PrependWatchReactor("nodes", func(ktesting.Action) (bool, watch.Interface, error) {
			mu.Lock()
			defer mu.Unlock()
			watches++
			if watches == 1 {
				return true, first, nil
			}
			return false, nil, nil
		})
		start(t, client, newFakePods())
		nodes := client.CoreV1().Nodes()
		var n *v1.Node
		eventually(t, "the node registered", func() bool {
			var err error
			n, err = nodes.Get(context.Background(), "node1", metav1.GetOptions{})
			return err == nil && n.Spec.Unschedulable
		})
		// Before the backup's restore: the Node at a high resourceVersion.
		before := n.DeepCopy()
		before.ResourceVersion = "1000"
		first.Modify(before)
		// The restore: the Node schedulable, at a lower resourceVersion.
		if _, err := nodes.Patch(context.Background(), "node1", types.StrategicMergePatchType,
			[]byte(`{"metadata":{"resourceVersion":"7"},"spec":{"unschedulable":null}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		first.Error(&apierrors.NewResourceExpired("too old resource version: 1000 (7)").ErrStatus)
		eventually(t, "the node watched again", func() bool { mu.Lock(); defer mu.Unlock(); return watches >= 2 })
		time.Sleep(20 * time.Second)
		eventually(t, "the node unschedulable again", func() bool {
			n, err := nodes.Get(context.Background(), "node1", metav1.GetOptions{})
			return err == nil && n.Spec.Unschedulable
		})
	})
}

// A server whose every watch fails at once with an error event is watched
// again after a back-off that grows, not every 200 ms: the error event is
// no sign that the watch works.
func TestWatchErrorEventsBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		var mu sync.Mutex
		watches := map[string]int{}
		for _, res := range []string{"nodes", "pods"} {
			client.PrependWatchReactor(res, func(ktesting.Action) (bool, watch.Interface, error) {
				mu.Lock()
				defer mu.Unlock()
				watches[res]++
				w := watch.NewFakeWithChanSize(1, false)
				w.Error(&apierrors.NewInternalError(errors.New("etcd unavailable")).ErrStatus)
				return true, w, nil
			})
		}
		start(t, client, newFakePods())
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		for res, n := range watches {
			if n > 30 {
				t.Errorf("%s watched %d times in 2 minutes of failing watches, want a back-off", res, n)
			}
		}
	})
}

// The Node forgotten twice (the watch's deletion and the status loop's
// NotFound both tell it) still wakes who waits for it when it is known
// again.
func TestNodeForgottenTwiceWakesItsWaiters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		m := New(Config{NodeName: "node1"}, newFakePods(), slog.New(slog.NewTextHandler(io.Discard, nil)))
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", UID: "u2"}}
		m.setNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", UID: "u1"}})
		m.forgetNode()
		got := make(chan types.UID, 1)
		go func() { uid, _ := m.nodeUID(context.Background()); got <- uid }()
		synctest.Wait()
		m.forgetNode()
		m.setNode(node)
		synctest.Wait()
		select {
		case uid := <-got:
			if uid != "u2" {
				t.Errorf("node UID %q, want u2", uid)
			}
		default:
			t.Fatal("the Node's waiter not woken when it was known again")
		}
	})
}

// A deletion of the Node the watch tells late, once the status loop has
// registered the Node again (another UID), leaves the new one known.
func TestNodeLateDeletionKeepsTheNewNode(t *testing.T) {
	m := New(Config{NodeName: "node1"}, newFakePods(), slog.New(slog.NewTextHandler(io.Discard, nil)))
	m.setNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", UID: "u2", ResourceVersion: "20"}})
	w := watch.NewFakeWithChanSize(1, false)
	w.Delete(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", UID: "u1", ResourceVersion: "10"}})
	w.Stop()
	if _, err := m.followNode(context.Background(), w, "", newBackoff(time.Millisecond, time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	if n := func() *v1.Node { m.nodeMu.Lock(); defer m.nodeMu.Unlock(); return m.node }(); n == nil || n.UID != "u2" {
		t.Errorf("the node known after a late deletion of the old one: %v, want u2", n)
	}
}
