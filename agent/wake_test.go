package agent

import (
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// An image imported while a pod's start is failing for the want of it (after
// the start looked it up, before the worker recorded ErrImageNeverPull and
// waited) still starts the pod at once: the import's Resync is not lost.
func TestImageArrivingDuringTheFailingStartWakesThePod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["etcd:3.5"] = true
		h := start(t, rt, Config{SyncFrequency: time.Hour})
		arrived := false
		rt.afterLookup = func(image string) {
			if arrived {
				return
			}
			arrived = true
			rt.mu.Lock()
			delete(rt.missing, image)
			rt.mu.Unlock()
			h.a.Resync() // what the import folder's watcher does
		}
		h.send([]manifest.Pod{testPod("etcd", "u1", v1.RestartPolicyAlways, ctr("etcd", "etcd:3.5"))})
		synctest.Wait()
		if !arrived {
			t.Fatal("the start never looked the image up")
		}
		if cs := h.pod("etcd").Status.ContainerStatuses[0]; cs.State.Running == nil {
			t.Fatalf("state %+v after the image arrived with a Resync, want running (calls %v)", cs.State, rt.Calls("start"))
		}
	})
}

