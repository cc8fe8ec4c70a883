package agent

import (
	"net/netip"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/status"
)

const webKey = "default/web-" + testNode

// published is the pod the status manager has for key: the cache's own.
func (h *harness) published(key string) *v1.Pod {
	return h.a.statuses.Desired(key)
}

// worker is the agent's worker of key, nil for none.
func (h *harness) worker(key string) *worker {
	h.a.mu.Lock()
	defer h.a.mu.Unlock()
	return h.a.workers[key]
}

// A resync of a pod of which nothing changed publishes the pod it published
// before, the same status; a probe result and a restart after such
// resyncs are published as before: Ready with its transition time, the
// restart count, the last termination.
func TestResyncUnchangedThenChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.SetHealth("/ready", 503)
		h := start(t, rt, Config{SyncFrequency: time.Second})
		c := ctr("web", "busybox")
		c.ReadinessProbe = httpProbe("/ready", 10, 1)
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, c)})
		time.Sleep(3 * time.Second) // resyncs
		synctest.Wait()
		before := h.published(webKey)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		after := h.published(webKey)
		if before != after {
			t.Errorf("a resync that changed nothing published another pod:\n%+v\n%+v", before.Status, after.Status)
		}
		if cs := after.Status.ContainerStatuses[0]; cs.Ready || cs.State.Running == nil || condition(*after, v1.PodReady).Status != v1.ConditionFalse {
			t.Fatalf("before a passing probe: %+v", after.Status)
		}
		notReadySince := condition(*after, v1.PodReady).LastTransitionTime

		// A probe result.
		rt.SetHealth("/ready", 200)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		p := h.pod("web")
		if !p.Status.ContainerStatuses[0].Ready || condition(p, v1.PodReady).Status != v1.ConditionTrue {
			t.Fatalf("after a passing probe: %+v", p.Status)
		}
		readySince := condition(p, v1.PodReady).LastTransitionTime
		if !readySince.After(notReadySince.Time) {
			t.Errorf("Ready transition time %v did not move past %v", readySince, notReadySince)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		if q := h.pod("web"); !equality.Semantic.DeepEqual(p, q) {
			t.Errorf("resyncs changed the status of a pod that did not change:\n%+v\n%+v", p.Status, q.Status)
		}

		// A restart.
		id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, containerIDPrefix)
		rt.Exit(id, 3)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		p = h.pod("web")
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount != 1 || cs.State.Running == nil || cs.LastTerminationState.Terminated == nil ||
			cs.LastTerminationState.Terminated.ExitCode != 3 || cs.ContainerID == containerIDPrefix+id {
			t.Fatalf("after an exit: %+v", cs)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if q := h.pod("web"); !equality.Semantic.DeepEqual(p.Status.ContainerStatuses, q.Status.ContainerStatuses) {
			t.Errorf("resyncs changed the containers of a pod that did not change:\n%+v\n%+v", p.Status, q.Status)
		}
	})
}

// The worker's status cache is of its desired pod only: a new generation
// replaces it, and a pod no longer desired drops it with its worker.
func TestStatusCacheFollowsThePod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{SyncFrequency: time.Second})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		time.Sleep(2 * time.Second)
		synctest.Wait()
		w := h.worker(webKey)
		if w == nil || w.statusCache == nil || string(w.statusCache.pod.UID) != "u1" || w.statusCache.published != h.published(webKey) {
			t.Fatalf("worker %p: cache %+v, want one of u1 with the published pod", w, w.statusCache)
		}

		h.send([]manifest.Pod{testPod("web", "u2", v1.RestartPolicyAlways, ctr("a", "busybox:2"))})
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if w.statusCache == nil || string(w.statusCache.pod.UID) != "u2" || w.statusCache.published != h.published(webKey) {
			t.Fatalf("after a new generation: cache %+v, want one of u2 with the published pod", w.statusCache)
		}

		h.send(nil)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if h.worker(webKey) != nil || h.published(webKey) != nil {
			t.Fatalf("pod removed: worker or status left")
		}
		if w.statusCache != nil {
			t.Errorf("pod removed: its worker kept a status cache %+v", w.statusCache)
		}
	})
}

// A publish that finds nothing changed allocates nothing: what the daemon
// allocated at rest was mostly each resync's status, made and copied anew.
func TestCachedStatusAllocatesNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{SyncFrequency: time.Hour})
		c := ctr("web", "busybox")
		c.ReadinessProbe = httpProbe("/ready", 10, 1)
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("init", "busybox"), c)})
		w := h.worker(webKey)
		pod := w.wanted()
		if w.statusCache == nil || w.statusCache.published != h.published(webKey) {
			t.Fatalf("no status cache after the first syncs")
		}
		st, rc := w.podState(pod), w.a.rollouts.condition(w.key, pod)
		var got *v1.Pod
		if n := testing.AllocsPerRun(20, func() { got = w.cachedStatus(pod, st, rc) }); n != 0 {
			t.Errorf("cachedStatus of a pod that did not change: %.0f allocations, want none", n)
		}
		if got != h.published(webKey) {
			t.Errorf("cachedStatus = %p, want the pod published %p", got, h.published(webKey))
		}
	})
}

// A probe result that comes while a status is generated (the probes run
// beside the worker) is published at the sync it wakes: the status cache
// does not take the result read after the status for the one it shows.
func TestProbeResultWhileGeneratingIsPublished(t *testing.T) {
	var armed atomic.Bool
	fired := false
	var rt *fakeRuntime
	statusGenerated = func(s, prev *v1.PodStatus) {
		// A status of the pod at rest, the same as the one before: the
		// readiness probe passes now, and runs before the cache is made.
		if prev != nil && statusEqual(s, prev) && armed.CompareAndSwap(true, false) {
			fired = true
			rt.SetHealth("/ready", 200)
			time.Sleep(11 * time.Second)
		}
	}
	defer func() { statusGenerated = nil }()
	synctest.Test(t, func(t *testing.T) {
		rt = newFakeRuntime()
		rt.SetHealth("/ready", 503)
		h := start(t, rt, Config{SyncFrequency: time.Second})
		c := ctr("web", "busybox")
		c.ReadinessProbe = httpProbe("/ready", 10, 1)
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, c)})
		time.Sleep(15 * time.Second) // the probe failed once; resyncs
		synctest.Wait()
		if p := h.pod("web"); condition(p, v1.PodReady).Status != v1.ConditionFalse {
			t.Fatalf("before a passing probe: %+v", p.Status)
		}
		armed.Store(true)
		// The same pod again: its status is generated again, the same.
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, c)})
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if !fired {
			t.Fatal("no status of the pod at rest was generated again")
		}
		if p := h.pod("web"); !p.Status.ContainerStatuses[0].Ready || condition(p, v1.PodReady).Status != v1.ConditionTrue {
			t.Errorf("a passing probe not published after resyncs: %+v", p.Status)
		}
	})
}

// setSome gives v, a field of any kind these structs have, a value other
// than its zero one.
func setSome(t *testing.T, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		setSome(t, k)
		setSome(t, e)
		m.SetMapIndex(k, e)
		v.Set(m)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		setSome(t, s.Index(0))
		v.Set(s)
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		setSome(t, p.Elem())
		v.Set(p)
	case reflect.Struct:
		switch x := v.Addr().Interface().(type) {
		case *time.Time:
			*x = time.Unix(7, 0)
		case *netip.Addr:
			*x = netip.MustParseAddr("192.0.2.7")
		default:
			for i := range v.NumField() {
				setSome(t, v.Field(i))
			}
		}
	default:
		t.Fatalf("no value for a field of kind %s (%s): teach setSome", v.Kind(), v.Type())
	}
}

// The status cache compares every field of what status.Generate reads of
// the runtime: a field added to podspec.ContainerStatus, SandboxStatus or
// NetworkConf and left out of its comparison (or of the sandbox's copy)
// would let a resync publish a status the field has changed.
func TestStatusCacheComparesEveryField(t *testing.T) {
	ct := reflect.TypeFor[podspec.ContainerStatus]()
	for i := range ct.NumField() {
		var a, b podspec.ContainerStatus
		setSome(t, reflect.ValueOf(&b).Elem().Field(i))
		if containerStatusEqual(a, b) {
			t.Errorf("containerStatusEqual does not compare ContainerStatus.%s", ct.Field(i).Name)
		}
	}
	st := reflect.TypeFor[podspec.SandboxStatus]()
	for i := range st.NumField() {
		a, b := &podspec.SandboxStatus{}, &podspec.SandboxStatus{}
		setSome(t, reflect.ValueOf(b).Elem().Field(i))
		if sandboxStatusEqual(a, b) {
			t.Errorf("sandboxStatusEqual does not compare SandboxStatus.%s", st.Field(i).Name)
		}
	}
	nt := reflect.TypeFor[podspec.NetworkConf]()
	for i := range nt.NumField() {
		a, b := &podspec.SandboxStatus{Chosen: &podspec.NetworkConf{}}, &podspec.SandboxStatus{Chosen: &podspec.NetworkConf{}}
		setSome(t, reflect.ValueOf(b.Chosen).Elem().Field(i))
		if sandboxStatusEqual(a, b) {
			t.Errorf("sandboxStatusEqual does not compare SandboxStatus.Chosen.%s", nt.Field(i).Name)
		}
	}
	// The copy shares nothing the runtime may change in place.
	var s podspec.SandboxStatus
	setSome(t, reflect.ValueOf(&s).Elem())
	c := copySandboxStatus(&s)
	if !sandboxStatusEqual(c, &s) {
		t.Fatal("copySandboxStatus is not equal to what it copied")
	}
	s.IPs[0], s.Plugins[0], s.Chosen.Plugins[0], s.Chosen.Why = netip.MustParseAddr("192.0.2.8"), "y", "y", "y"
	if sandboxStatusEqual(c, &s) {
		t.Error("copySandboxStatus shares a slice or the chosen network with what it copied")
	}
}

// sameStatus tells whether the generation would give the status.Generation
// the cache kept, without making one: every field of status.Generation,
// Remembered and Stop that differs must make it say no, or a field added
// to them and left out of it would let a resync publish a stale status.
func TestSameStatusComparesEveryField(t *testing.T) {
	last := podspec.ContainerStatus{ID: "old", Name: "a", State: podspec.StateExited, ExitCode: 1}
	g := &generation{uid: "u1", policy: v1.RestartPolicyAlways, startTime: time.Unix(1, 0),
		stop:         &stopRequest{reason: "Evicted", message: "low on memory"},
		final:        map[string]podspec.ContainerStatus{"a": last},
		ctrs:         map[string]*ctrInfo{"a": {reason: "CrashLoopBackOff", message: "back-off", last: &last}},
		firstAttempt: map[string]int{"a": 2},
	}
	if !g.sameStatus(g.status()) {
		t.Fatal("sameStatus says a generation's own status differs")
	}
	gt := reflect.TypeFor[status.Generation]()
	for i := range gt.NumField() {
		s := copyGeneration(g.status())
		setSome(t, reflect.ValueOf(s).Elem().Field(i))
		if g.sameStatus(s) {
			t.Errorf("sameStatus does not compare Generation.%s", gt.Field(i).Name)
		}
	}
	rt := reflect.TypeFor[status.Remembered]()
	for i := range rt.NumField() {
		s := copyGeneration(g.status())
		r := s.Containers["a"]
		setSome(t, reflect.ValueOf(&r).Elem().Field(i))
		s.Containers["a"] = r
		if g.sameStatus(s) {
			t.Errorf("sameStatus does not compare Generation.Containers[].%s", rt.Field(i).Name)
		}
	}
	st := reflect.TypeFor[status.Stop]()
	for i := range st.NumField() {
		s := copyGeneration(g.status())
		setSome(t, reflect.ValueOf(s.Stop).Elem().Field(i))
		if g.sameStatus(s) {
			t.Errorf("sameStatus does not compare Generation.Stop.%s", st.Field(i).Name)
		}
	}
}
