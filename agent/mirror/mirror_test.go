package mirror

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/status"
)

// fakePods is the agent's side: static pods set by the test.
type fakePods struct {
	mu       sync.Mutex
	unsynced bool // Synced says false
	ch       chan struct{}
	pods     map[string]*v1.Pod // by full name, as the status manager has them
	stopping map[string][]*v1.Pod
	next     []string
	rec      *events.Recorder
	taken    int // updates Next handed to the mirror
	looks    int // calls of Synced: the mirror asking whether it may take a pod for an orphan
}

func newFakePods() *fakePods {
	return &fakePods{ch: make(chan struct{}, 1), pods: map[string]*v1.Pod{}, rec: events.New("node1", 0, slog.New(slog.NewTextHandler(io.Discard, nil)))}
}

func (f *fakePods) Watch() Watch             { return f }
func (f *fakePods) Events() *events.Recorder { return f.rec }
func (f *fakePods) C() <-chan struct{}       { return f.ch }
func (f *fakePods) Close()                   {}
func (f *fakePods) Synced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.looks++
	return !f.unsynced
}

// Desired shares the pod set last, which the test makes anew for each set,
// as a worker publishes a new pod for each change.
func (f *fakePods) Desired(name string) status.Shared {
	f.mu.Lock()
	defer f.mu.Unlock()
	return status.Share(f.pods[name])
}
func (f *fakePods) Stopping(name string) []status.Shared {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []status.Shared
	for _, p := range f.stopping[name] {
		out = append(out, status.Share(p))
	}
	return out
}

// setStopping sets the older generations of name still stopping.
func (f *fakePods) setStopping(name string, ps ...*v1.Pod) {
	f.mu.Lock()
	if f.stopping == nil {
		f.stopping = map[string][]*v1.Pod{}
	}
	f.stopping[name] = ps
	f.next = append(f.next, name)
	f.mu.Unlock()
	select {
	case f.ch <- struct{}{}:
	default:
	}
}

func (f *fakePods) Keys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Collect(maps.Keys(f.pods))
}
func (f *fakePods) Next() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.next
	f.next = nil
	f.taken += len(out)
	return out
}

// counts returns how many updates the mirror took and how often it asked Synced.
func (f *fakePods) counts() (taken, looks int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.taken, f.looks
}

func (f *fakePods) set(name string, p *v1.Pod) {
	f.mu.Lock()
	if p == nil {
		delete(f.pods, name)
	} else {
		f.pods[name] = p
	}
	f.next = append(f.next, name)
	f.mu.Unlock()
	select {
	case f.ch <- struct{}{}:
	default:
	}
}

func staticPod(hash string, phase v1.PodPhase) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-node1", Namespace: "kube-system", UID: types.UID("static-" + hash),
			Annotations: map[string]string{manifest.AnnotationHash: hash, manifest.AnnotationSource: "file"},
		},
		Spec:   v1.PodSpec{NodeName: "node1", Containers: []v1.Container{{Name: "c", Image: "busybox"}}},
		Status: v1.PodStatus{Phase: phase, QOSClass: v1.PodQOSBestEffort},
	}
}

func start(t *testing.T, client kubernetes.Interface, pods *fakePods) *Mirror {
	t.Helper()
	return startWith(t, Config{NodeName: "node1", RegisterNode: true, Version: "test", NodeLabels: map[string]string{"example.com/role": "cp"}}, client, pods)
}

// startWith is start with the mirror's configuration cfg.
func startWith(t *testing.T, cfg Config, client kubernetes.Interface, pods *fakePods) *Mirror {
	t.Helper()
	m := New(cfg, pods, slog.New(slog.NewTextHandler(io.Discard, nil)))
	m.newClient = func() (clients, error) { return clients{api: fakeAPI{client}, watch: fakeAPI{client}}, nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

// eventually polls cond every 10ms for up to 5s of the bubble's fake time
// (the tests run in synctest bubbles: a poll costs no wall-clock time).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func getMirror(client kubernetes.Interface) *v1.Pod {
	p, err := client.CoreV1().Pods("kube-system").Get(context.Background(), "web-node1", metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

func TestMirrorPodLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		pods := newFakePods()
		pods.set("kube-system/web-node1", staticPod("h1", v1.PodRunning))
		start(t, client, pods)

		var node *v1.Node
		eventually(t, "the node registered", func() bool {
			n, err := client.CoreV1().Nodes().Get(context.Background(), "node1", metav1.GetOptions{})
			node = n
			return err == nil
		})
		for k, want := range map[string]string{v1.LabelHostname: "node1", v1.LabelOSStable: "linux", "example.com/role": "cp"} {
			if node.Labels[k] != want {
				t.Errorf("node label %s = %q, want %q", k, node.Labels[k], want)
			}
		}
		if got := node.Status.NodeInfo.ContainerRuntimeVersion; got != "staticpodd://test" {
			t.Errorf("containerRuntimeVersion = %q", got)
		}

		eventually(t, "the mirror pod with its status", func() bool {
			p := getMirror(client)
			return p != nil && p.Status.Phase == v1.PodRunning
		})
		mp := getMirror(client)
		if mp.Annotations[AnnotationMirror] != "h1" {
			t.Errorf("mirror annotation = %q, want h1", mp.Annotations[AnnotationMirror])
		}
		if len(mp.OwnerReferences) != 1 || mp.OwnerReferences[0].Kind != "Node" || mp.OwnerReferences[0].UID != node.UID ||
			mp.OwnerReferences[0].Controller == nil || !*mp.OwnerReferences[0].Controller {
			t.Errorf("owner references = %+v, want one controller reference to node %s", mp.OwnerReferences, node.UID)
		}

		// A new generation: the outdated mirror pod is replaced.
		pods.set("kube-system/web-node1", staticPod("h2", v1.PodPending))
		eventually(t, "the mirror pod of the new hash", func() bool {
			p := getMirror(client)
			return p != nil && p.Annotations[AnnotationMirror] == "h2"
		})

		// The static pod goes: its mirror pod is deleted.
		pods.set("kube-system/web-node1", nil)
		eventually(t, "the orphaned mirror pod deleted", func() bool { return getMirror(client) == nil })

		eventually(t, "the lease", func() bool {
			l, err := client.CoordinationV1().Leases(v1.NamespaceNodeLease).Get(context.Background(), "node1", metav1.GetOptions{})
			return err == nil && l.Spec.RenewTime != nil && *l.Spec.HolderIdentity == "node1"
		})
	})
}

// The mirror pod's status is the static pod's: observedGeneration stays
// unset, in the status and its conditions, whatever the mirror pod's own
// generation (the API server's, which the kubelet does not report; the node
// e2e "mirror pod updates" suite checks it is always empty).
func TestMirrorPodStatusHasNoObservedGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := staticPod("h1", v1.PodRunning)
		p.Status.Conditions = []v1.PodCondition{{Type: v1.PodReady, Status: v1.ConditionTrue}}
		existing := mirrorPod(status.Share(p), "node1", "")
		existing.Generation = 3
		client := fake.NewClientset(existing)
		pods := newFakePods()
		pods.set("kube-system/web-node1", p)
		start(t, client, pods)
		eventually(t, "the mirror pod's status", func() bool {
			m := getMirror(client)
			return m != nil && m.Status.Phase == v1.PodRunning
		})
		m := getMirror(client)
		if m.Status.ObservedGeneration != 0 || len(m.Status.Conditions) != 1 || m.Status.Conditions[0].ObservedGeneration != 0 {
			t.Errorf("mirror pod status observedGeneration %d, conditions %+v; want 0 everywhere", m.Status.ObservedGeneration, m.Status.Conditions)
		}
	})
}

// A static pod removed or replaced keeps its mirror pod, with its status,
// while it stops within its grace period, as the kubelet does (the node e2e
// MirrorPodWithGracePeriod suite): only once it has stopped is the mirror
// pod deleted, or replaced by the new generation's.
func TestMirrorPodKeptWhileItsPodStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		pods := newFakePods()
		const name = "kube-system/web-node1"
		pods.set(name, staticPod("h1", v1.PodRunning))
		start(t, client, pods)
		eventually(t, "the mirror pod", func() bool { p := getMirror(client); return p != nil && p.Status.Phase == v1.PodRunning })
		uid := getMirror(client).UID
		kept := func(what string) {
			t.Helper()
			time.Sleep(time.Second) // the mirror took the change (fake time)
			if p := getMirror(client); p == nil || p.UID != uid || p.Status.Phase != v1.PodRunning {
				t.Fatalf("%s: mirror pod %v, want uid %s Running", what, p, uid)
			}
		}

		// Removed, still stopping: kept.
		pods.setStopping(name, staticPod("h1", v1.PodRunning))
		pods.set(name, nil)
		kept("removed while it stops")
		// Stopped: deleted.
		pods.setStopping(name)
		eventually(t, "the mirror pod deleted once its pod stopped", func() bool { return getMirror(client) == nil })

		// Replaced while it stops: kept until then, then the new one's.
		pods.set(name, staticPod("h1", v1.PodRunning))
		eventually(t, "the mirror pod again", func() bool { return getMirror(client) != nil })
		uid = getMirror(client).UID
		pods.setStopping(name, staticPod("h1", v1.PodRunning))
		pods.set(name, staticPod("h2", v1.PodPending))
		kept("replaced while it stops")
		pods.setStopping(name)
		eventually(t, "the new generation's mirror pod", func() bool {
			p := getMirror(client)
			return p != nil && p.Annotations[AnnotationMirror] == "h2"
		})
	})
}

// The API server refuses mirror pods until its PriorityClasses exist: the
// create is retried within a fraction of a second, not at the next resync.
func TestMirrorPodRetriedPromptlyWhilePriorityClassMissing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		var mu sync.Mutex
		refusals := 0
		client.PrependReactor("create", "pods", func(ktesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			if refusals < 3 {
				refusals++
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "web-node1",
					errors.New("no PriorityClass with name system-node-critical was found"))
			}
			return false, nil, nil
		})
		pods := newFakePods()
		pods.set("kube-system/web-node1", staticPod("h1", v1.PodRunning))
		m := start(t, client, pods)
		began := time.Now()
		eventually(t, "the mirror pod", func() bool { return getMirror(client) != nil })
		if d := time.Since(began); d > 2*time.Second {
			t.Errorf("mirror pod made after %v, want well under 2s with three refusals", d)
		}
		eventually(t, "health back to ok", func() bool { _, err := m.Status(); return err == nil })
	})
}

// A starting API server's NodeRestriction answers a node's delete from an
// informer not yet filled: NotFound of a pod that is there. The orphan is
// deleted all the same, within a fraction of a second, not left until the
// watch is listed again (the chaos soak found it left there).
func TestOrphanDeletedThoughTheAPIServerSaysNotFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		var mu sync.Mutex
		refusals := 0
		client.PrependReactor("delete", "pods", func(ktesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			if refusals < 3 {
				refusals++
				return true, nil, apierrors.NewNotFound(schema.GroupResource{Resource: "pods"}, "web-node1")
			}
			return false, nil, nil
		})
		pods := newFakePods()
		pods.set("kube-system/web-node1", staticPod("h1", v1.PodRunning))
		m := start(t, client, pods)
		eventually(t, "the mirror pod", func() bool { return getMirror(client) != nil })

		pods.set("kube-system/web-node1", nil)
		began := time.Now()
		eventually(t, "the orphaned mirror pod deleted", func() bool { return getMirror(client) == nil })
		if d := time.Since(began); d > 2*time.Second {
			t.Errorf("orphan deleted after %v, want well under 2s with three false NotFounds", d)
		}
		mu.Lock()
		if refusals != 3 {
			t.Errorf("%d deletes answered NotFound, want 3", refusals)
		}
		mu.Unlock()
		eventually(t, "health back to ok", func() bool { _, err := m.Status(); return err == nil })
	})
}

// No API server at all: Run keeps trying, Status says why, nothing grows.
func TestUnreachableAPIServerIsReportedNotFatal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pods := newFakePods()
		logger := slog.New(slog.NewTextHandler(io.Discard, nil))
		m := New(Config{NodeName: "node1", Credentials: NewCredentials(CredentialsConfig{Kubeconfig: "/nonexistent/kubeconfig"}, logger)}, pods, logger)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- m.Run(ctx) }()
		eventually(t, "the failure reported", func() bool { _, err := m.Status(); return err != nil })
		_, err := m.Status()
		if want := "/nonexistent/kubeconfig"; !contains(err.Error(), want) {
			t.Errorf("status %q does not name %s", err, want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// A status that changes all the time is patched at a bounded rate, the
// newest one last, and an unchanged one not at all.
func TestStatusPatchesRateLimitedNewestWins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		count := statusPatches(client)
		pods := newFakePods()
		p := staticPod("h1", v1.PodRunning)
		pods.set("kube-system/web-node1", p)
		start(t, client, pods)
		eventually(t, "the mirror pod running", func() bool {
			m := getMirror(client)
			return m != nil && m.Status.Phase == v1.PodRunning
		})

		began, before := time.Now(), count()
		for i := range 300 {
			q := p.DeepCopy()
			q.Status.Message = fmt.Sprint(i)
			pods.set("kube-system/web-node1", q)
			time.Sleep(3 * time.Millisecond)
		}
		eventually(t, "the newest status patched", func() bool {
			m := getMirror(client)
			return m != nil && m.Status.Message == "299"
		})
		n, secs := count()-before, time.Since(began).Seconds()
		t.Logf("%d status patches in %.1fs for 300 changes", n, secs)
		if limit := statusBurst + int(statusQPS*secs) + 2; n > limit {
			t.Errorf("%d status patches in %.1fs for 300 changes, want at most %d", n, secs, limit)
		}
		settled := count()
		taken, _ := pods.counts()
		pods.set("kube-system/web-node1", withMessage(p, "299"))
		// Past the status delay and a full resync: every timer that could
		// patch has fired once every goroutine is idle again.
		time.Sleep(time.Minute + statusDelay)
		synctest.Wait()
		if now, _ := pods.counts(); now != taken+1 {
			t.Fatalf("the mirror took %d updates, want the unchanged status taken (1)", now-taken)
		}
		if count() != settled {
			t.Errorf("an unchanged status was patched again")
		}
	})
}

// A restarted daemon does not take the mirror pods it finds for orphans
// before the agent has all its sources' pods: they would be deleted and made
// again at every restart.
func TestMirrorPodsKeptUntilTheAgentSynced(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		ctx := context.Background()
		n, err := client.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", UID: "n1"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		old := mirrorPod(status.Share(staticPod("h1", v1.PodRunning)), "node1", n.UID)
		old.UID = "m1"
		if _, err := client.CoreV1().Pods("kube-system").Create(ctx, old, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		pods := newFakePods()
		pods.unsynced = true
		start(t, client, pods)
		eventually(t, "the node's status posted", func() bool {
			n, err := client.CoreV1().Nodes().Get(ctx, "node1", metav1.GetOptions{})
			return err == nil && len(n.Status.Conditions) > 0
		})
		// The pod is looked at, and looked at again a second later: each look
		// asks Synced, and each found it false.
		eventually(t, "the mirror pod looked at twice", func() bool { _, looks := pods.counts(); return looks >= 2 })
		synctest.Wait()
		if getMirror(client) == nil {
			t.Fatal("the mirror pod was deleted before the agent had its sources' pods")
		}
		pods.mu.Lock()
		pods.unsynced = false
		pods.mu.Unlock()
		eventually(t, "the orphaned mirror pod deleted once the agent synced", func() bool { return getMirror(client) == nil })
	})
}

// An outage whose errors differ from request to request (each names its own
// URL) is one log line, not one a request; the recovery is one more.
func TestOutageLoggedOnce(t *testing.T) {
	var buf bytes.Buffer
	m := New(Config{NodeName: "node1"}, newFakePods(), slog.New(slog.NewTextHandler(&buf, nil)))
	for i := range 50 {
		m.report("pods", fmt.Errorf(`Put "https://127.0.0.1:6443/api/v1/namespaces/default/pods/p%d/status": connection refused`, i))
	}
	if _, err := m.Status(); err == nil || !strings.Contains(err.Error(), "p49") {
		t.Errorf("health during the outage: %v, want the newest error", err)
	}
	m.report("pods", nil)
	if got := strings.Count(buf.String(), "failing; retrying"); got != 1 {
		t.Errorf("%d failure lines for one outage, want 1:\n%s", got, buf.String())
	}
	if got := strings.Count(buf.String(), "working again"); got != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", got, buf.String())
	}
}
