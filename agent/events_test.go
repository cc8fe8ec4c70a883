package agent

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// event returns the one event with reason, failing when there is not
// exactly one.
func (h *harness) event(reason string) v1.Event {
	h.t.Helper()
	var found []v1.Event
	for _, e := range h.a.Events().List() {
		if e.Reason == reason {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		h.t.Fatalf("%d %s events, want 1: %+v", len(found), reason, found)
	}
	return found[0]
}

func (h *harness) reasons() []string {
	var out []string
	for _, e := range h.a.Events().List() {
		out = append(out, e.Reason)
	}
	return out
}

// A crash loop, as `staticpodd events` shows it: the kubelet's reasons and
// messages about the container, repeats counted on one event.
func TestEventsOfACrashLoop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["a"] = 1
		h := start(t, rt, Config{})
		t0 := time.Now()
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})

		started := h.event("Started")
		o := started.InvolvedObject
		if o.Kind != "Pod" || o.APIVersion != "v1" || o.Namespace != "default" || o.Name != "web-node1" || o.UID != "u1" ||
			o.FieldPath != "spec.containers{a}" {
			t.Errorf("involvedObject = %+v", o)
		}
		if started.Type != v1.EventTypeNormal || started.Message != "Container started" || started.Count != 2 ||
			started.Source.Host != testNode || started.Namespace != "default" || !strings.HasPrefix(started.Name, "web-node1.") {
			t.Errorf("Started event = %+v, want Normal \"Container started\" counted twice (first run and the restart at once)", started)
		}
		if got := h.event("Pulled").Message; got != `Container image "busybox" already present on machine` {
			t.Errorf("Pulled message %q", got)
		}
		if got := h.event("Created").Message; got != "Container created" {
			t.Errorf("Created message %q", got)
		}
		backoff := h.event("BackOff")
		if backoff.Type != v1.EventTypeWarning || backoff.Message != "Back-off restarting failed container a in pod web-node1_default(u1)" {
			t.Errorf("BackOff event = %+v", backoff)
		}

		time.Sleep(time.Minute)
		synctest.Wait()
		started = h.event("Started")
		if started.Count < 4 || !started.FirstTimestamp.Time.Equal(t0) || !started.LastTimestamp.After(t0.Add(20*time.Second)) {
			t.Errorf("after a minute of crash loop: Started count %d first %v last %v, want one event counted on, first seen at the start",
				started.Count, started.FirstTimestamp, started.LastTimestamp)
		}
		if logs := h.logs.String(); !strings.Contains(logs, `level=WARN msg=event type=Warning reason=BackOff pod=default/web-node1 uid=u1 container=a`) {
			t.Errorf("the BackOff event is not logged:\n%s", logs)
		}
	})
}

// A missing image: the pod's own pull policy, and how to bring the image in,
// in the waiting message and in the event, which counts each retry.
func TestEventImageNeverPull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["etcd:3.5"] = true
		h := start(t, rt, Config{Paths: manifest.Paths{RootDir: "/srv/spd"}})
		c := ctr("etcd", "etcd:3.5")
		c.ImagePullPolicy = v1.PullIfNotPresent
		h.send([]manifest.Pod{testPod("etcd", "u1", v1.RestartPolicyAlways, c)})

		want := "Container image \"etcd:3.5\" is not present with pull policy of IfNotPresent, and staticpodd does not pull images: " +
			"import it with `staticpodd images import --root-dir /srv/spd FILE`, or copy the image archive into /srv/spd/images/import/"
		if w := h.pod("etcd").Status.ContainerStatuses[0].State.Waiting; w == nil || w.Message != want {
			t.Errorf("waiting = %+v\nwant message %q", w, want)
		}
		ev := h.event("ErrImageNeverPull")
		if ev.Type != v1.EventTypeWarning || ev.Message != want {
			t.Errorf("event = %+v", ev)
		}
		if got := h.event("Failed").Message; got != "Error: ErrImageNeverPull" {
			t.Errorf("Failed message %q", got)
		}
		h.a.Resync()
		synctest.Wait()
		if got := h.event("ErrImageNeverPull").Count; got != ev.Count+1 {
			t.Errorf("count after a retry = %d, want %d", got, ev.Count+1)
		}
	})
}

// A liveness probe that fails is an Unhealthy event, and the kill that
// follows a Killing event saying why.
func TestEventsOfFailedLiveness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.SetHealth("/live", 200)
		h := start(t, rt, Config{})
		c := ctr("web", "busybox")
		c.LivenessProbe = httpProbe("/live", 1, 2)
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, c)})
		rt.SetHealth("/live", 500)
		time.Sleep(3 * time.Second)
		synctest.Wait()
		un := h.event("Unhealthy")
		if un.Type != v1.EventTypeWarning || un.Message != "Liveness probe failed: HTTP probe failed with statuscode: 500" ||
			un.InvolvedObject.FieldPath != "spec.containers{web}" {
			t.Errorf("Unhealthy event = %+v", un)
		}
		if got := h.event("Killing").Message; got != "Container web failed liveness probe, will be restarted" {
			t.Errorf("Killing message %q", got)
		}
		if logs := h.logs.String(); !strings.Contains(logs, `msg="container exited" pod=default/web-node1 container=web`) ||
			!strings.Contains(logs, "restart=now") {
			t.Errorf("the kill's exit is not logged with its restart:\n%s", logs)
		}
	})
}

// A manifest problem is one FailedValidation event about the node, recorded
// when it appears, not at each relist.
func TestEventManifestProblem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		bad := manifest.Problem{Origin: "/etc/kubernetes/manifests/bad.yaml",
			Err: errors.New("/etc/kubernetes/manifests/bad.yaml: spec.containers: at least one container is required")}
		h.send(nil, bad)
		h.send(nil, bad)
		ev := h.event("FailedValidation")
		if ev.Type != v1.EventTypeWarning || ev.Count != 1 || ev.InvolvedObject.Kind != "Node" || ev.InvolvedObject.Name != testNode ||
			ev.Message != "Error validating manifest /etc/kubernetes/manifests/bad.yaml: spec.containers: at least one container is required" {
			t.Errorf("event = %+v", ev)
		}
		h.send(nil)
		h.send(nil, bad)
		if ev := h.event("FailedValidation"); ev.Count != 2 {
			t.Errorf("a problem that came back: count %d, want 2", ev.Count)
		}
	})
}

// Changed is closed when a pod's status changes: how run --once waits.
func TestChangedSignalsStatusChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		ch := h.a.Changed()
		select {
		case <-ch:
			t.Fatal("changed before any pod")
		default:
		}
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		select {
		case <-ch:
		default:
			t.Fatal("not signalled after a pod started")
		}
	})
}

// The Killing event of an edit is about the old generation.
func TestKillingEventOfAnEdit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		h.send([]manifest.Pod{testPod("web", "u2", v1.RestartPolicyAlways, ctr("a", "busybox", "sleep", "9"))})
		if got := h.event("Killing"); got.InvolvedObject.UID != "u1" || got.Message != "Stopping container a" {
			t.Errorf("Killing event = %+v, want it about the old generation u1", got)
		}
	})
}

// A manifest URL whose request fails is a FailedFetch event, not a
// validation error.
func TestEventFetchProblem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send(nil, manifest.Problem{Origin: "http://10.0.0.1/pods", Fetch: true,
			Err: errors.New("http://10.0.0.1/pods: 503 Service Unavailable")})
		ev := h.event("FailedFetch")
		if ev.Type != v1.EventTypeWarning || ev.Message != "Error fetching manifests from http://10.0.0.1/pods: 503 Service Unavailable" {
			t.Errorf("event = %+v", ev)
		}
		for _, e := range h.a.Events().List() {
			if e.Reason == "FailedValidation" {
				t.Errorf("a failed request recorded as %s: %s", e.Reason, e.Message)
			}
		}
	})
}

// The network a pod got is an event; a change of the CNI configuration
// under it is one warning, however many syncs see it, and a second change
// is another.
func TestEventsOfThePodNetwork(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{SyncFrequency: time.Second})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		h.pod("web")
		if e := h.event("NetworkAttached"); e.Type != v1.EventTypeNormal ||
			e.Message != `Attached to CNI network "staticpodd" from default (plugins bridge)` {
			t.Errorf("NetworkAttached: %s %q", e.Type, e.Message)
		}
		for i, name := range []string{"podman", "other"} {
			rt.mu.Lock()
			rt.chosen = &podspec.NetworkConf{Network: name, Source: "/etc/cni/net.d/00-" + name + ".conflist", Plugins: []string{"bridge", "firewall"}}
			rt.mu.Unlock()
			time.Sleep(5 * time.Second) // five syncs
			synctest.Wait()
			var found []v1.Event
			for _, e := range h.a.Events().List() {
				if e.Reason == "NetworkConfigChanged" {
					found = append(found, e)
				}
			}
			want := `The CNI configuration changed: the pod keeps network "staticpodd" from default (plugins bridge) until it is made again; ` +
				`a pod made now gets network "` + name + `" from /etc/cni/net.d/00-` + name + `.conflist (plugins bridge, firewall)`
			if len(found) != i+1 || found[i].Count != 1 || found[i].Type != v1.EventTypeWarning || found[i].Message != want {
				t.Fatalf("after change %d: %+v, want %d NetworkConfigChanged, the last once: %q", i+1, found, i+1, want)
			}
		}
	})
}

// A liveness probe on a named port the container does not have could not be
// made: it is thrown away, as the kubelet's, so the container is never
// restarted for it; an Unhealthy event says so once, with the kubelet's
// message.
func TestErroredLivenessProbeRestartsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		c := ctr("web", "busybox")
		c.LivenessProbe = httpProbe("/live", 1, 1)
		c.LivenessProbe.HTTPGet.Port = intstr.FromString("nope")
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, c)})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		un := h.event("Unhealthy")
		if un.Type != v1.EventTypeWarning || un.Count != 1 ||
			un.Message != `Liveness probe errored and resulted in unknown state: port "nope" not found` ||
			un.InvolvedObject.FieldPath != "spec.containers{web}" {
			t.Errorf("Unhealthy event = %+v", un)
		}
		if got := rt.Calls("start"); len(got) != 1 {
			t.Errorf("starts %q, want the container started once and never restarted", got)
		}
		if cs := h.pod("web").Status.ContainerStatuses[0]; cs.RestartCount != 0 || cs.State.Running == nil {
			t.Errorf("container %+v, want running, never restarted", cs)
		}
	})
}

// A liveness probe whose answer's body is cut short errs, as the kubelet's
// DoHTTPProbe: thrown away, so the container is never restarted for it, and
// the Unhealthy event names the failure state the kubelet's does.
func TestLivenessProbeCutBodyRestartsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.SetHealth("/live", -1)
		h := start(t, rt, Config{})
		c := ctr("web", "busybox")
		c.LivenessProbe = httpProbe("/live", 1, 1)
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, c)})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		un := h.event("Unhealthy")
		if un.Type != v1.EventTypeWarning || un.Count != 1 ||
			un.Message != `Liveness probe errored and resulted in failure state: unexpected EOF` {
			t.Errorf("Unhealthy event = %+v", un)
		}
		if got := rt.Calls("start"); len(got) != 1 {
			t.Errorf("starts %q, want the container started once and never restarted", got)
		}
	})
}

// holdFirstRunningStatus makes the first status generated that shows a
// container running wait, before it is published, until every other
// goroutine of the bubble waits (a probe's for its next period: the clock
// moves only then), then calls then, if set. It reports whether it held one.
func holdFirstRunningStatus(t *testing.T, then func()) *atomic.Bool {
	var held atomic.Bool
	statusGenerated = func(s, _ *v1.PodStatus) {
		for _, cs := range s.ContainerStatuses {
			if cs.State.Running != nil && held.CompareAndSwap(false, true) {
				time.Sleep(time.Millisecond)
				if then != nil {
					then()
				}
			}
		}
	}
	t.Cleanup(func() { statusGenerated = nil })
	return &held
}

// probeEventBeforeThePublish runs pod web with liveness probe live under a
// status held as holdFirstRunningStatus says, and checks its one Unhealthy
// event says want of container web.
func probeEventBeforeThePublish(t *testing.T, rt *fakeRuntime, held *atomic.Bool, live *v1.Probe, want string) {
	h := start(t, rt, Config{})
	c := ctr("web", "busybox")
	c.LivenessProbe = live
	h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, c)})
	time.Sleep(10 * time.Second)
	synctest.Wait()
	if !held.Load() {
		t.Fatal("the container was never published running")
	}
	un := h.event("Unhealthy")
	if un.Message != want || un.InvolvedObject.FieldPath != "spec.containers{web}" || un.InvolvedObject.Name != "web-node1" {
		t.Errorf("Unhealthy event = %+v", un)
	}
}

// A probe that errs at its first try, before the status that shows its
// container running is published (probes start just before it), still gets
// its Unhealthy event: it is recorded once a streak, so a first one lost
// would be lost for as long as the probe errs.
func TestProbeErroredBeforeThePublishHasItsEvent(t *testing.T) {
	held := holdFirstRunningStatus(t, nil)
	synctest.Test(t, func(t *testing.T) {
		live := httpProbe("/live", 1, 1)
		live.HTTPGet.Port = intstr.FromString("nope")
		probeEventBeforeThePublish(t, newFakeRuntime(), held, live,
			`Liveness probe errored and resulted in unknown state: port "nope" not found`)
	})
}

// A probe that fails before the first status showing its container is
// published still has its Unhealthy event: the event names the container
// from the probe's own pod, as an erring probe's does. The probe's later
// runs pass, so that failure is the only one.
func TestProbeFailedBeforeThePublishHasItsEvent(t *testing.T) {
	var rt *fakeRuntime
	held := holdFirstRunningStatus(t, func() { rt.SetHealth("/live", 200) })
	synctest.Test(t, func(t *testing.T) {
		rt = newFakeRuntime()
		rt.SetHealth("/live", 500)
		probeEventBeforeThePublish(t, rt, held, httpProbe("/live", 1, 1),
			"Liveness probe failed: HTTP probe failed with statuscode: 500")
	})
}
