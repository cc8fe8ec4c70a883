package mirror

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/status"
)

// managerPods is the agent's side as the agent has it: the static pods in a
// status manager, read through its watch, every source synced.
type managerPods struct {
	m   *status.Manager
	rec *events.Recorder

	mu   sync.Mutex
	keys []string
}

type managerWatch struct{ *status.Watch }

func (managerWatch) Synced() bool { return true }

func newManagerPods() *managerPods {
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	return &managerPods{m: status.NewManager("node1", logger), rec: events.New("node1", 0, logger)}
}

func (p *managerPods) Watch() Watch {
	p.mu.Lock()
	defer p.mu.Unlock()
	return managerWatch{p.m.Watch(p.keys, func(string) bool { return true })}
}

func (p *managerPods) Events() *events.Recorder { return p.rec }

// publish makes pod what the status manager shows of its full name, as a
// worker's publish does: the same pod again when nothing changed.
func (p *managerPods) publish(pod *v1.Pod) {
	key := pod.Namespace + "/" + pod.Name
	p.mu.Lock()
	p.keys = append(p.keys, key)
	p.mu.Unlock()
	p.m.Update(key, func(_ *v1.Pod, stopping map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod) {
		return pod, stopping
	})
}

// restingPod is static pod i of a control plane node, as its worker
// publishes it once it runs: a container with its flags, probes, resources
// and host paths, and its status with the conditions, addresses and
// container status the kubelet shows.
func restingPod(i int) *v1.Pod {
	name := fmt.Sprintf("pod%03d-node1", i)
	hash := fmt.Sprintf("hash%03d", i)
	started := metav1.NewTime(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	cond := func(t v1.PodConditionType) v1.PodCondition {
		return v1.PodCondition{Type: t, Status: v1.ConditionTrue, LastTransitionTime: started}
	}
	probe := func(path string) *v1.Probe {
		return &v1.Probe{ProbeHandler: v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromInt32(6443), Host: "127.0.0.1", Scheme: v1.URISchemeHTTPS}},
			InitialDelaySeconds: 10, TimeoutSeconds: 15, PeriodSeconds: 10, FailureThreshold: 8}
	}
	var args []string
	for j := range 20 {
		args = append(args, fmt.Sprintf("--flag-%02d=/etc/kubernetes/pki/value-%02d", j, j))
	}
	hostPath := func(name, path string) (v1.Volume, v1.VolumeMount) {
		t := v1.HostPathDirectoryOrCreate
		return v1.Volume{Name: name, VolumeSource: v1.VolumeSource{HostPath: &v1.HostPathVolumeSource{Path: path, Type: &t}}},
			v1.VolumeMount{Name: name, MountPath: path, ReadOnly: true}
	}
	var vols []v1.Volume
	var mounts []v1.VolumeMount
	for _, p := range []string{"/etc/kubernetes/pki", "/etc/ssl/certs", "/usr/share/ca-certificates", "/etc/ca-certificates"} {
		v, m := hostPath(fmt.Sprintf("vol-%d", len(vols)), p)
		vols, mounts = append(vols, v), append(mounts, m)
	}
	priority := int32(2000001000)
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "kube-system", UID: types.UID("static-" + hash),
			Labels: map[string]string{"component": name, "tier": "control-plane"},
			Annotations: map[string]string{manifest.AnnotationHash: hash, manifest.AnnotationSource: "file",
				"kubernetes.io/config.seen": "2026-12-06T10:00:00Z", "kubeadm.kubernetes.io/endpoint": "10.0.0.1:6443"},
		},
		Spec: v1.PodSpec{
			NodeName: "node1", HostNetwork: true, PriorityClassName: "system-node-critical", Priority: &priority,
			Containers: []v1.Container{{
				Name: "main", Image: "registry.k8s.io/kube-apiserver:v1.37.2", Command: []string{"kube-apiserver"}, Args: args,
				Resources:      v1.ResourceRequirements{Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse("250m")}},
				LivenessProbe:  probe("/livez"),
				ReadinessProbe: probe("/readyz"),
				StartupProbe:   probe("/livez"),
				VolumeMounts:   mounts,
			}},
			Volumes: vols,
		},
		Status: v1.PodStatus{
			Phase: v1.PodRunning,
			Conditions: []v1.PodCondition{cond(v1.PodReadyToStartContainers), cond(v1.PodInitialized), cond(v1.PodReady),
				cond(v1.ContainersReady), cond(v1.PodScheduled)},
			HostIP: "10.0.0.1", HostIPs: []v1.HostIP{{IP: "10.0.0.1"}}, PodIP: "10.0.0.1", PodIPs: []v1.PodIP{{IP: "10.0.0.1"}},
			StartTime: &started, QOSClass: v1.PodQOSBurstable,
			ContainerStatuses: []v1.ContainerStatus{{
				Name: "main", Ready: true, RestartCount: 1, Image: "registry.k8s.io/kube-apiserver:v1.37.2",
				ImageID:     "registry.k8s.io/kube-apiserver@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
				ContainerID: status.ContainerIDPrefix + fmt.Sprintf("%064d", i),
				Started:     new(true),
				State:       v1.ContainerState{Running: &v1.ContainerStateRunning{StartedAt: started}},
				LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 137, Reason: "Error",
					StartedAt: started, FinishedAt: started, ContainerID: status.ContainerIDPrefix + fmt.Sprintf("%063d1", i)}},
			}},
		},
	}
}

// mirrorUIDs makes the fake API server give each pod it creates a UID of
// its own, as an API server does (the fake gives none).
func mirrorUIDs(client *fake.Clientset) {
	var mu sync.Mutex
	n := 0
	client.PrependReactor("create", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		if p, ok := a.(ktesting.CreateAction).GetObject().(*v1.Pod); ok && p.UID == "" {
			mu.Lock()
			n++
			p.UID = types.UID(fmt.Sprintf("mirror-%d", n))
			mu.Unlock()
		}
		return false, nil, nil
	})
}

// statusPatches counts the status patches the fake API server is asked for.
func statusPatches(client *fake.Clientset) func() int {
	var mu sync.Mutex
	n := 0
	client.PrependReactor("patch", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" {
			mu.Lock()
			n++
			mu.Unlock()
		}
		return false, nil, nil
	})
	return func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// newTestSync is the pod sync of a mirror of pods on client, on node1,
// every status patched at the first pass (not 20 and the rest later).
func newTestSync(tb testing.TB, pods *managerPods, client *fake.Clientset) *podSync {
	tb.Helper()
	m := New(Config{NodeName: "node1"}, pods, slog.New(slog.NewTextHandler(io.Discard, nil)))
	m.setNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1", UID: "node-uid"}})
	w := pods.Watch()
	tb.Cleanup(w.Close)
	s := newPodSync(m, w, fakeAPI{client}, fakeAPI{client})
	s.statusLimit = flowcontrol.NewFakeAlwaysRateLimiter()
	return s
}

// startResting publishes one resting pod, starts a mirror of it on client
// (whose reactors the caller set) and waits for its mirror pod Running
// and Ready; it returns the status manager and the pod.
func startResting(t *testing.T, client *fake.Clientset) (*managerPods, *v1.Pod) {
	t.Helper()
	pods := newManagerPods()
	p := restingPod(1)
	pods.publish(p)
	startManaged(t, client, pods)
	eventually(t, "the mirror pod with its status", func() bool {
		m := getStatic(client, p.Name)
		return m != nil && m.Status.Phase == v1.PodRunning && podReady(m)
	})
	return pods, p
}

// deleteInside makes the fake API server delete a pod inside the first
// request of verb on pods (on subresource, "" for the pod itself), and s
// take the watch's event of the delete before the request's answer.
func deleteInside(t *testing.T, client *fake.Clientset, s *podSync, verb, subresource string) {
	var mu sync.Mutex
	armed := true
	client.PrependReactor(verb, "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		del := armed && a.GetSubresource() == subresource
		armed = armed && !del
		mu.Unlock()
		if !del {
			return false, nil, nil
		}
		handled, obj, err := ktesting.ObjectReaction(client.Tracker())(a)
		gone := obj.(*v1.Pod).DeepCopy()
		if err := client.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), gone.Namespace, gone.Name); err != nil {
			t.Error(err)
		}
		s.apply(watch.Deleted, gone) // the watch's event, taken first
		return handled, obj, err
	})
}

// restingSync is the mirror's pod sync of n static pods at rest: their
// mirror pods made on a fake API server and their status patched once.
func restingSync(tb testing.TB, n int) (*podSync, *fake.Clientset) {
	tb.Helper()
	client := fake.NewClientset()
	mirrorUIDs(client)
	pods := newManagerPods()
	for i := range n {
		pods.publish(restingPod(i))
	}
	s := newTestSync(tb, pods, client)
	s.m.podsMu.Lock()
	s.m.sync = s
	s.m.podsMu.Unlock()
	resync(s)
	for i := range n {
		p, err := client.CoreV1().Pods("kube-system").Get(context.Background(), restingPod(i).Name, metav1.GetOptions{})
		if err != nil || p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) != 1 {
			tb.Fatalf("mirror pod %d after the first sync: %v, %v", i, p, err)
		}
	}
	return s, client
}

// resync is the mirror's periodic full pass.
func resync(s *podSync) {
	s.markAll()
	s.syncDirty(context.Background())
}

// A resync of static pods of which nothing changed costs the mirror next to
// nothing: fewer allocations in all than there are pods. It copied each pod
// twice and encoded its status to find it unchanged.
func TestRestingMirrorAllocatesNextToNothing(t *testing.T) {
	const n = 100
	s, client := restingSync(t, n)
	before := len(client.Actions())
	allocs := testing.AllocsPerRun(5, func() { resync(s) })
	t.Logf("%.0f allocations per resync of %d unchanged pods", allocs, n)
	if allocs >= n {
		t.Errorf("%.0f allocations per resync of %d unchanged pods, want fewer than one a pod", allocs, n)
	}
	if got := client.Actions()[before:]; len(got) > 0 {
		t.Errorf("%d requests to the API server for unchanged pods, want none: %v", len(got), got[0])
	}
}

// The Node's status, computed every 10 s, counts the static pods that are
// not finished without copying them: it copied each.
func TestNodeStatusCountsPodsWithoutCopies(t *testing.T) {
	const n = 100
	s, _ := restingSync(t, n)
	if got := s.m.activeStaticPods(); got != n {
		t.Fatalf("%d active static pods, want %d", got, n)
	}
	allocs := testing.AllocsPerRun(5, func() { s.m.activeStaticPods() })
	t.Logf("%.0f allocations to count %d pods", allocs, n)
	if allocs >= n {
		t.Errorf("%.0f allocations to count %d pods, want fewer than one a pod", allocs, n)
	}
}

// BenchmarkNodeStatusPods is the count of the static pods that the Node's
// status makes every 10 s, of 100 pods.
func BenchmarkNodeStatusPods(b *testing.B) {
	s, _ := restingSync(b, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s.m.activeStaticPods()
	}
}

// BenchmarkRestingMirror is one periodic resync of 100 static pods of which
// nothing changed, their mirror pods up to date.
func BenchmarkRestingMirror(b *testing.B) {
	s, _ := restingSync(b, 100)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		resync(s)
	}
}

// startManaged starts the mirror on the fake API server with the static
// pods of pods.
func startManaged(t *testing.T, client *fake.Clientset, pods *managerPods) *Mirror {
	t.Helper()
	m := New(Config{NodeName: "node1", RegisterNode: true, Version: "test"}, pods, slog.New(slog.NewTextHandler(io.Discard, nil)))
	m.newClient = func() (clients, error) { return clients{api: fakeAPI{client}, watch: fakeAPI{client}}, nil }
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { m.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return m
}

func getStatic(client *fake.Clientset, name string) *v1.Pod {
	p, err := client.CoreV1().Pods("kube-system").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return nil
	}
	return p
}

// withMessage is p published again with status message msg: a new pod,
// as a worker publishes a changed status.
func withMessage(p *v1.Pod, msg string) *v1.Pod {
	q := p.DeepCopy()
	q.Status.Message = msg
	return q
}

// After resyncs that changed nothing, neither republished (the same pod
// again) nor periodic, a changed status is patched at once; so is one that
// goes back to what it was, and a mirror pod made again (a new UID) gets
// the status although the static pod did not change.
func TestRestingMirrorPatchesWhatChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		mirrorUIDs(client)
		patches := statusPatches(client)
		pods, p := startResting(t, client)
		settled := patches()
		for range 5 {
			pods.publish(p) // a worker's resync: the same pod again
			time.Sleep(time.Minute)
			synctest.Wait()
		}
		if n := patches() - settled; n != 0 {
			t.Fatalf("%d status patches in 5 resyncs of an unchanged pod, want none", n)
		}

		for _, msg := range []string{"changed", "", "changed again"} {
			pods.publish(withMessage(p, msg))
			eventually(t, fmt.Sprintf("status message %q patched", msg), func() bool {
				m := getStatic(client, p.Name)
				return m != nil && m.Status.Message == msg && m.Status.Phase == v1.PodRunning
			})
		}
		q := withMessage(p, "changed again")
		pods.publish(q)

		// The mirror pod deleted by someone: made again, with a new UID, and
		// given the status of the static pod, which did not change.
		old := getStatic(client, p.Name)
		if err := client.CoreV1().Pods("kube-system").Delete(context.Background(), p.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the mirror pod made again with the status", func() bool {
			m := getStatic(client, p.Name)
			return m != nil && m.UID != old.UID && m.Status.Message == "changed again" && m.Status.Phase == v1.PodRunning
		})
		// And once more without the watch telling (a lost event): the next
		// periodic pass finds it gone and makes it again.
		before := patches()
		old = getStatic(client, p.Name)
		client.Tracker().Delete(v1.SchemeGroupVersion.WithResource("pods"), "kube-system", p.Name)
		eventually(t, "the mirror pod made again after an unseen delete", func() bool {
			m := getStatic(client, p.Name)
			return m != nil && m.UID != old.UID && m.Status.Message == "changed again"
		})
		if patches() == before {
			t.Errorf("the mirror pod made again was not patched")
		}
	})
}

// A status patch that fails is tried again, though the static pod does not
// change meanwhile, and the same failure at a resync too.
func TestRestingMirrorRetriesAFailedPatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		mirrorUIDs(client)
		var mu sync.Mutex
		failing := 0
		client.PrependReactor("patch", "pods", func(a ktesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			if a.GetSubresource() == "status" && failing > 0 {
				failing--
				return true, nil, errors.New("connection reset by peer")
			}
			return false, nil, nil
		})
		fail := func(n int) { mu.Lock(); failing = n; mu.Unlock() }
		failed := func() bool { mu.Lock(); defer mu.Unlock(); return failing == 0 }
		pods, p := startResting(t, client)

		fail(3)
		q := withMessage(p, "changed")
		pods.publish(q)
		eventually(t, "the patches failed", failed)
		eventually(t, "the status patched after its failures", func() bool {
			return getStatic(client, p.Name).Status.Message == "changed"
		})

		// A failed patch of a pod then republished unchanged, again and
		// again: patched all the same.
		fail(1)
		r := withMessage(p, "changed twice")
		pods.publish(r)
		eventually(t, "the patch failed", failed)
		for range 3 {
			pods.publish(r)
		}
		eventually(t, "the status patched after its failure", func() bool {
			return getStatic(client, p.Name).Status.Message == "changed twice"
		})
	})
}

// The mirror forgets what it patched onto a mirror pod that is gone: a
// relist that no longer has it, or its delete event, leaves nothing of it.
func TestRestingMirrorForgetsGoneMirrorPods(t *testing.T) {
	s, client := restingSync(t, 3)
	s.mu.Lock()
	n := len(s.patched)
	s.mu.Unlock()
	if n != 3 {
		t.Fatalf("%d mirror pods patched, want 3", n)
	}
	gone := getStatic(client, restingPod(0).Name)
	s.apply(watch.Deleted, gone)
	list, err := client.CoreV1().Pods("kube-system").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var kept []v1.Pod
	for _, p := range list.Items {
		if p.Name != restingPod(1).Name && p.Name != restingPod(0).Name {
			kept = append(kept, p)
		}
	}
	s.replace(kept)
	s.mu.Lock()
	n = len(s.patched)
	s.mu.Unlock()
	if n != 1 {
		t.Errorf("%d mirror pods remembered patched after two went, want 1", n)
	}
}

// notReady is mirror pod p with its Ready and ContainersReady conditions
// False, as the node lifecycle controller marks the pods of a node whose
// Lease lapsed (MarkPodsNotReady), a status update of its own.
func notReady(p *v1.Pod) *v1.Pod {
	q := p.DeepCopy()
	for i := range q.Status.Conditions {
		if c := &q.Status.Conditions[i]; c.Type == v1.PodReady || c.Type == v1.ContainersReady {
			c.Status = v1.ConditionFalse
		}
	}
	return q
}

func podReady(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// A mirror pod's status changed on the API server by someone else (the node
// lifecycle controller marking it not ready while the node's Lease lapsed,
// kubectl, another controller) is patched back to the static pod's, which
// did not change: the kubelet's status manager compares the mirror pod's
// status with its own (needsReconcile) and patches it again. The mirror
// compared the static pod's status only with what it had patched itself,
// so the mirror pod stayed not ready for as long as the static pod did not
// change.
func TestRestingMirrorPatchesBackAStatusChangedByAnother(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		mirrorUIDs(client)
		pods, p := startResting(t, client)
		synctest.Wait()
		m := notReady(getStatic(client, p.Name))
		// The API server gives each write a resourceVersion of its own; the
		// fake keeps the one it is given.
		m.ResourceVersion = "1000"
		if _, err := client.CoreV1().Pods("kube-system").UpdateStatus(context.Background(), m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			pods.publish(p) // a worker's resync: the same pod again
			time.Sleep(time.Minute)
			synctest.Wait()
		}
		if m := getStatic(client, p.Name); !podReady(m) {
			t.Errorf("the mirror pod stays not ready after two resyncs of its ready static pod: %v", m.Status.Conditions)
		}
	})
}

// A mirror pod deleted while its status patch is under way (kubectl
// delete, the garbage collector), the watch telling of the delete before
// the patch's answer is taken, is made again: the answer of the patch
// does not bring back, as there, the mirror pod the watch said was gone,
// nor what was patched onto it. It did both, and the next syncs found the
// very pod patched there already: no mirror pod until the static pod's
// status changed.
func TestRestingMirrorRemakesAMirrorPodDeletedDuringItsPatch(t *testing.T) {
	client := fake.NewClientset()
	mirrorUIDs(client)
	pods := newManagerPods()
	p := restingPod(1)
	pods.publish(p)
	s := newTestSync(t, pods, client)
	resync(s)
	first := getStatic(client, p.Name)
	if first == nil || first.Status.Phase != v1.PodRunning {
		t.Fatalf("mirror pod after the first sync: %v", first)
	}

	deleteInside(t, client, s, "patch", "status")
	q := withMessage(p, "changed")
	pods.publish(q)
	resync(s)
	if getStatic(client, p.Name) != nil {
		t.Fatal("the mirror pod was not deleted during its patch")
	}
	for range 2 {
		pods.publish(q) // a worker's resync: the same pod again
		resync(s)
	}
	again := getStatic(client, p.Name)
	if again == nil || again.UID == first.UID || again.Status.Message != "changed" {
		t.Fatalf("mirror pod after two resyncs: %v, want one made again with the status", again)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.patched[string(first.UID)]; ok || len(s.patched) != 1 {
		t.Errorf("%d mirror pods remembered patched, the deleted one among them: %v", len(s.patched), ok)
	}
}

// A condition of another owner on a mirror pod (a controller's, a
// readiness gate's, DisruptionTarget) stays there: the mirror's patches,
// from a changed status of the static pod or patching back a status
// written by someone else, leave it, as the kubelet's (mergePodStatus
// keeps the conditions it does not own). They removed it at every patch,
// and patching back a status written by someone else would fight the
// controller that keeps it.
func TestRestingMirrorKeepsTheConditionsOfOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		mirrorUIDs(client)
		patches := statusPatches(client)
		pods, p := startResting(t, client)
		synctest.Wait()
		const foo = v1.PodConditionType("example.com/Foo")
		hasFoo := func(m *v1.Pod) bool {
			for _, c := range m.Status.Conditions {
				if c.Type == foo && c.Status == v1.ConditionTrue {
					return true
				}
			}
			return false
		}
		m := getStatic(client, p.Name)
		m.Status.Conditions = append(m.Status.Conditions, v1.PodCondition{Type: foo, Status: v1.ConditionTrue})
		m.ResourceVersion = "1000"
		if _, err := client.CoreV1().Pods("kube-system").UpdateStatus(context.Background(), m, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		before := patches()
		for range 2 {
			pods.publish(p)
			time.Sleep(time.Minute)
			synctest.Wait()
		}
		if n := patches() - before; n != 0 {
			t.Errorf("%d status patches for a condition of another owner, want none", n)
		}
		if !hasFoo(getStatic(client, p.Name)) {
			t.Fatalf("the condition of another owner was removed at a resync: %v", getStatic(client, p.Name).Status.Conditions)
		}
		pods.publish(withMessage(p, "changed"))
		eventually(t, "the changed status patched", func() bool { return getStatic(client, p.Name).Status.Message == "changed" })
		if !hasFoo(getStatic(client, p.Name)) {
			t.Errorf("the condition of another owner was removed by a patch: %v", getStatic(client, p.Name).Status.Conditions)
		}
		// A condition of the agent's own that goes from the static pod's
		// status goes from the mirror pod's too.
		rolled := withMessage(p, "rolled back")
		rolled.Status.Conditions = append(rolled.Status.Conditions, v1.PodCondition{Type: agent.ConditionRolledBack, Status: v1.ConditionTrue})
		pods.publish(rolled)
		has := func(t v1.PodConditionType) bool {
			return slices.ContainsFunc(getStatic(client, p.Name).Status.Conditions, func(c v1.PodCondition) bool { return c.Type == t })
		}
		eventually(t, "the rollback shown", func() bool { return has(agent.ConditionRolledBack) && has(foo) })
		pods.publish(withMessage(p, "undone"))
		eventually(t, "the rollback gone", func() bool {
			return getStatic(client, p.Name).Status.Message == "undone" && !has(agent.ConditionRolledBack)
		})
		if !hasFoo(getStatic(client, p.Name)) {
			t.Errorf("the condition of another owner was removed by a patch: %v", getStatic(client, p.Name).Status.Conditions)
		}
	})
}

// A mirror pod found made already (a restarted daemon, before its watch
// listed the node's pods), then deleted before it is taken (kubectl, the
// garbage collector), the watch telling of the delete first, is made again:
// what the read of it answered does not bring it back among the mirror
// pods known, where the next syncs would find it with the status it shows.
func TestRestingMirrorRemakesAMirrorPodDeletedAsItIsFound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) { remakesAMirrorPodDeletedAsItIsFound(t) })
}

func remakesAMirrorPodDeletedAsItIsFound(t *testing.T) {
	client := fake.NewClientset()
	mirrorUIDs(client)
	pods := newManagerPods()
	p := restingPod(1)
	pods.publish(p)
	newSync := func() *podSync { return newTestSync(t, pods, client) }
	resync(newSync())
	first := getStatic(client, p.Name)
	if first == nil || first.Status.Phase != v1.PodRunning {
		t.Fatalf("mirror pod after the first sync: %v", first)
	}

	s := newSync() // the daemon restarted
	deleteInside(t, client, s, "get", "")
	resync(s)
	if getStatic(client, p.Name) != nil {
		t.Fatal("the mirror pod was not deleted as it was found")
	}
	for range 2 {
		time.Sleep(retryMax) // any back-off over
		pods.publish(p)      // a worker's resync: the same pod again
		resync(s)
	}
	again := getStatic(client, p.Name)
	if again == nil || again.UID == first.UID || again.Status.Phase != v1.PodRunning {
		t.Fatalf("mirror pod after two resyncs, %v apart: %v, want one made again with the status", retryMax, again)
	}
}
