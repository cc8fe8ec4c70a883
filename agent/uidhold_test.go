package agent

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// One worker at a time drives a pod UID: a pod whose UID a worker of
// another name holds waits for it (Agent.waitForHeldUIDsLocked).

// A manifest renamed with its explicit metadata.uid kept is a pod of a new
// name with the UID of one still running: the new pod waits, with a problem
// saying why, until the old one has stopped and is torn down, so that the
// old pod's teardown (its sandbox, its directory with the records) never
// takes what the new one made, and two workers never drive one UID.
func TestRenamedPodKeepingItsUIDStartsOnceTheOldHasStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.stubborn["a"] = true // the old pod takes its grace period to stop
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		if got := rt.Running(); len(got) != 1 {
			t.Fatalf("running %q, want the first pod's container", got)
		}
		rt.mu.Lock()
		rt.calls = nil
		rt.mu.Unlock()
		h.send([]manifest.Pod{testPod("site", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		synctest.Wait()
		if got := rt.Calls("sandbox", "start"); len(got) != 0 {
			t.Fatalf("calls %q while the old pod stops: the renamed one did not wait", got)
		}
		if got := h.a.Problems(); len(got) != 1 || !strings.Contains(got[0].Err.Error(), "metadata.uid u1") {
			t.Errorf("problems while the renamed pod waits = %v, want one saying why", got)
		}
		time.Sleep(6 * time.Second) // the old pod's grace period
		synctest.Wait()
		got := rt.Calls("signal", "destroy", "rmsandbox", "rmvolumes", "sandbox", "start")
		want := []string{"signal", "signal", "destroy", "rmsandbox u1", "rmvolumes u1", "sandbox u1", "start u1/a#1"}
		if len(got) != len(want) {
			t.Fatalf("calls = %q, want the old pod torn down, then the new one started: %q", got, want)
		}
		for i := range want {
			if !strings.HasPrefix(got[i], want[i]) {
				t.Fatalf("calls = %q, want the old pod torn down, then the new one started: %q", got, want)
			}
		}
		if p := h.pod("site"); p.Status.Phase != v1.PodRunning {
			t.Errorf("renamed pod's phase = %q, want Running", p.Status.Phase)
		}
	})
}

// A pod given the UID of another that is edited to a new one (web u1 → u2,
// a new site u1, in one update) waits for web's worker to tear u1 down, not
// only while web still wants u1: another reconcile meanwhile starts nothing
// of it, and the teardown's end starts it, with no other update.
func TestPodWaitsForAUIDItsHolderNoLongerWants(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.stubborn["a"] = true
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		rt.mu.Lock()
		rt.calls = nil
		rt.mu.Unlock()
		set := []manifest.Pod{
			testPod("web", "u2", v1.RestartPolicyAlways, ctr("a", "busybox")),
			testPod("site", "u1", v1.RestartPolicyAlways, ctr("a", "busybox")),
		}
		h.send(set)
		time.Sleep(time.Second)
		h.send(set) // another reconcile while web's worker stops u1
		synctest.Wait()
		if got := rt.Calls("sandbox u1", "start u1"); len(got) != 0 {
			t.Fatalf("calls %q while web's worker stops u1", got)
		}
		time.Sleep(10 * time.Second) // the grace period
		synctest.Wait()
		got := rt.Calls("rmsandbox u1", "sandbox u1", "start u1", "start u2")
		if i, j := slices.Index(got, "rmsandbox u1"), slices.Index(got, "sandbox u1"); i < 0 || j < i {
			t.Fatalf("calls %q: want u1 torn down, then made again for site", got)
		}
		if !slices.Contains(got, "start u2/a#0") || !slices.Contains(got, "start u1/a#0") {
			t.Errorf("calls %q: want web's u2 and site's u1 started", got)
		}
		if len(h.a.Problems()) != 0 {
			t.Errorf("problems once site started: %v", h.a.Problems())
		}
	})
}

// An adopted pod whose manifest is gone is stopped by a worker that never
// wanted it, of its recorded name or, with none recorded, an orphan worker:
// a pod with its UID that comes meanwhile waits for it too.
func TestPodWaitsForAnAdoptedPodOfItsUIDStopping(t *testing.T) {
	for _, recorded := range []string{"web-node1", ""} {
		synctest.Test(t, func(t *testing.T) {
			rt := newFakeRuntime()
			rt.stubborn["a"] = true
			rt.adopt(podspec.ContainerStatus{ID: "old", PodUID: "u1", PodName: recorded, PodNamespace: "default", Name: "a",
				Image: "busybox", State: podspec.StateRunning, TerminationGracePeriod: 5 * time.Second})
			h := start(t, rt, Config{})
			h.send(nil)
			synctest.Wait()
			h.send([]manifest.Pod{testPod("site", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
			synctest.Wait()
			if got := rt.Calls("sandbox", "start"); len(got) != 0 {
				t.Fatalf("recorded name %q: calls %q while the adopted pod stops", recorded, got)
			}
			time.Sleep(6 * time.Second)
			synctest.Wait()
			want := []string{"destroy old", "rmsandbox u1", "sandbox u1", "start u1/a#1"} // its restarts count on
			if got := rt.Calls("destroy", "rmsandbox", "sandbox", "start"); !slices.Equal(got, want) {
				t.Fatalf("recorded name %q: calls = %q, want %q", recorded, got, want)
			}
		})
	}
}

// A manifest renamed while the daemon was down, its metadata.uid kept, and a
// new manifest of the old name: the running pod is the renamed one's (its
// UID), not the name's, whatever the order the reconcile meets them in; it
// is never torn down under the pod that adopts it.
func TestRenamedWhileDownAdoptedByItsUID(t *testing.T) {
	for range 20 {
		synctest.Test(t, func(t *testing.T) {
			rt := newFakeRuntime()
			pod := testPod("site", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
			rt.adopt(podspec.ContainerStatus{ID: "old", PodUID: "u1", PodName: "web-node1", PodNamespace: "default", Name: "a",
				Hash: hashOf(&pod.Spec.Containers[0]), Image: "busybox", State: podspec.StateRunning})
			h := start(t, rt, Config{})
			h.send([]manifest.Pod{testPod("web", "u2", v1.RestartPolicyAlways, ctr("a", "busybox")), pod})
			synctest.Wait()
			want := []string{"sandbox u2", "start u2/a#0"}
			if got := rt.Calls("signal", "destroy", "rmsandbox", "sandbox", "start"); !slices.Equal(got, want) {
				t.Fatalf("calls = %q, want the adopted u1 kept for site and u2 started for web: %q", got, want)
			}
		})
	}
}

// A worker that only wanted a UID, nothing of it made (its pod waits for a
// pod it starts after), holds nothing: a pod given that UID, by a rename or
// beside an edit of the first to another UID, starts at once, and the first
// worker never takes the UID back.
func TestPodDoesNotWaitForAUIDOnlyWanted(t *testing.T) {
	for _, edited := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			rt := newFakeRuntime()
			rt.SetHealth("/ready", 503)
			h := start(t, rt, Config{})
			dep := ctr("etcd", "busybox")
			dep.ReadinessProbe = httpProbe("/ready", 10, 1)
			etcd := testPod("etcd", "ua", v1.RestartPolicyAlways, dep)
			h.send([]manifest.Pod{etcd, startAfter(testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox")), "etcd")})
			synctest.Wait()
			if got := rt.Calls("sandbox u1"); len(got) != 0 {
				t.Fatalf("web made its sandbox before etcd was ready: %q", got)
			}
			set := []manifest.Pod{etcd, testPod("site", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))}
			if edited {
				set = append(set, startAfter(testPod("web", "u2", v1.RestartPolicyAlways, ctr("a", "busybox")), "etcd"))
			}
			h.send(set)
			synctest.Wait()
			if got := rt.Calls("sandbox u1", "start u1"); !slices.Equal(got, []string{"sandbox u1", "start u1/a#0"}) {
				t.Fatalf("web edited %v: calls %q, want site started at once", edited, got)
			}
			rt.SetHealth("/ready", 200) // etcd ready: web (u2) may start, never u1 again
			time.Sleep(time.Minute)
			synctest.Wait()
			if got := rt.Calls("sandbox u1", "start u1"); len(got) != 2 {
				t.Errorf("web edited %v: calls %q: u1 made again", edited, got)
			}
			if len(h.a.Problems()) != 0 {
				t.Errorf("web edited %v: problems %v", edited, h.a.Problems())
			}
		})
	}
}

// Before the first full reconcile, a worker that exists already (its pod
// from one source) and is then given, by another source, the UID of a pod
// found running does not claim that pod: the pod of its UID waits until the
// full reconcile's worker of its recorded name has stopped it, never driven
// by two workers.
func TestPodWaitsForARunningPodAWorkerDidNotClaim(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.stubborn["a"] = true
		rt.adopt(podspec.ContainerStatus{ID: "old", PodUID: "u1", PodName: "old-node1", PodNamespace: "default", Name: "a",
			Image: "busybox", State: podspec.StateRunning, TerminationGracePeriod: 5 * time.Second})
		h := start(t, rt, Config{Sources: []string{manifest.SourceFile, manifest.SourceHTTP}})
		web2 := testPod("web", "u2", v1.RestartPolicyAlways, ctr("b", "busybox"))
		web2.Origin = "/z/web.yaml"
		h.updates <- sourceUpdate(manifest.SourceFile, web2)
		synctest.Wait()
		web1 := testPod("web", "u1", v1.RestartPolicyAlways, ctr("b", "busybox"))
		web1.Source, web1.Origin = manifest.SourceHTTP, "/a/web.yaml"
		h.updates <- sourceUpdate(manifest.SourceHTTP, web1) // preferred: its UID runs
		synctest.Wait()
		if got := rt.Calls("sandbox u1", "start u1"); len(got) != 0 {
			t.Fatalf("calls %q while the pod found running stops", got)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		got := rt.Calls("destroy old", "rmsandbox u1", "sandbox u1", "start u1")
		if want := []string{"destroy old", "rmsandbox u1", "sandbox u1", "start u1/b#0"}; !slices.Equal(got, want) {
			t.Fatalf("calls = %q, want %q", got, want)
		}
	})
}
