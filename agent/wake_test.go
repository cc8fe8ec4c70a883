package agent

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// An image imported while a pod's start is failing for the want of it (after
// the start looked it up, before the worker recorded ErrImageNeverPull and
// waited) still starts the pod at once: the import's Resync is not lost. The
// start is held inside that window until the Resync has reached the worker.
func TestImageArrivingDuringTheFailingStartWakesThePod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["etcd:3.5"] = true
		h := start(t, rt, Config{SyncFrequency: time.Hour})
		arrived, release := false, make(chan struct{})
		rt.afterLookup = func(image string) {
			if arrived {
				return
			}
			arrived = true
			rt.mu.Lock()
			delete(rt.missing, image)
			rt.mu.Unlock()
			h.a.Resync() // what the import folder's watcher does
			<-release
		}
		h.send([]manifest.Pod{testPod("etcd", "u1", v1.RestartPolicyAlways, ctr("etcd", "etcd:3.5"))})
		if !arrived {
			t.Fatal("the start never looked the image up")
		}
		// Everything else is blocked: the Resync went as far as it goes
		// while the worker is still in its failing start.
		close(release)
		synctest.Wait()
		if cs := h.pod("etcd").Status.ContainerStatuses[0]; cs.State.Running == nil {
			t.Fatalf("state %+v after the image arrived with a Resync, want running (calls %v)", cs.State, rt.Calls("start"))
		}
	})
}

// An image imported while the pull of it hangs (a registry that does not
// answer) starts the pod at once under IfNotPresent: the import's Resync
// ends the wait for the pull, which is no longer needed.
func TestImageImportedDuringAHangingPullStartsThePod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["app:v1"] = true
		p := &fakePuller{rt: rt, block: make(chan struct{})} // never closed: the pull hangs
		h := start(t, rt, Config{Images: p, SyncFrequency: time.Hour})
		c := ctr("app", "app:v1")
		c.ImagePullPolicy = v1.PullIfNotPresent
		h.send([]manifest.Pod{testPod("app", "u1", v1.RestartPolicyAlways, c)})
		if p.count() != 1 {
			t.Fatalf("%d pulls, want 1 in progress", p.count())
		}
		rt.mu.Lock()
		delete(rt.missing, "app:v1") // imported
		rt.mu.Unlock()
		h.a.Resync()
		synctest.Wait()
		cs := h.pod("app").Status.ContainerStatuses[0]
		if cs.State.Running == nil {
			t.Fatalf("state %+v with the image imported during the pull, want running", cs.State)
		}
		noPullFailure(t, h)
	})
}

// An image imported while a pull of it fails (the registry refuses, the
// pull returns its error after the import) starts the pod at once and
// records no pull failure: the image is there.
func TestImageImportedDuringAFailingPullIsNoPullFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["app:v1"] = true
		p := &fakePuller{rt: rt, block: make(chan struct{}), err: errors.New("dial tcp: network is unreachable")}
		h := start(t, rt, Config{Images: p, SyncFrequency: time.Hour})
		c := ctr("app", "app:v1")
		c.ImagePullPolicy = v1.PullIfNotPresent
		h.send([]manifest.Pod{testPod("app", "u1", v1.RestartPolicyAlways, c)})
		rt.mu.Lock()
		delete(rt.missing, "app:v1") // imported, without a Resync yet
		rt.mu.Unlock()
		close(p.block) // the pull fails
		synctest.Wait()
		if cs := h.pod("app").Status.ContainerStatuses[0]; cs.State.Running == nil {
			t.Fatalf("state %+v, want running: the image came while the pull failed", cs.State)
		}
		noPullFailure(t, h)
	})
}

// Under imagePullPolicy Always an imported image does not stand for the
// pull: the pull goes on, as the kubelet's would.
func TestImageImportedDuringAPullUnderAlwaysKeepsPulling(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["app:v1"] = true
		p := &fakePuller{rt: rt, block: make(chan struct{})}
		h := start(t, rt, Config{Images: p, SyncFrequency: time.Hour})
		c := ctr("app", "app:v1")
		c.ImagePullPolicy = v1.PullAlways
		h.send([]manifest.Pod{testPod("app", "u1", v1.RestartPolicyAlways, c)})
		rt.mu.Lock()
		delete(rt.missing, "app:v1")
		rt.mu.Unlock()
		h.a.Resync()
		synctest.Wait()
		if w := h.pod("app").Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ContainerCreating" {
			t.Fatalf("waiting = %+v, want ContainerCreating while the pull goes on", w)
		}
		close(p.block)
		synctest.Wait()
		if cs := h.pod("app").Status.ContainerStatuses[0]; cs.State.Running == nil || p.count() != 1 {
			t.Fatalf("state %+v after %d pulls, want running after the one pull", cs.State, p.count())
		}
	})
}

// noPullFailure: an image that came by import while its pull went on left
// no Failed or BackOff event; a pull given up for it is no failure.
func noPullFailure(t *testing.T, h *harness) {
	t.Helper()
	for _, e := range h.a.Events().List() {
		if e.Reason == "Failed" || e.Reason == "BackOff" {
			t.Errorf("event %s %q, want none: the image came by import", e.Reason, e.Message)
		}
	}
}
