package agent

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// A pod with a sidecar whose 60 s stop is under way (its manifest removed)
// is stopped through the CRI while its app container still ignores its
// SIGTERM: the app gets SIGKILL 2 s after StopPod, and the sidecar, stopped
// after it, gets the kubelet's minimum then, not what is left of the pod's
// 60 s.
func TestStopPodCutsTheSidecarsStopToo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, rt, _ := removeAppAndSidecar(t)
		t1 := time.Now()
		if err := h.stopPodWithin(2*time.Minute, "u1"); err != nil {
			t.Fatalf("StopPod: %v", err)
		}
		// The kubelet: the app is killed again with 2 s, the sidecar's turn
		// comes then, and it gets the 2 s minimum.
		for call, want := range map[string]time.Duration{"signal c2 killed": 2 * time.Second, "signal c1 terminated": 2 * time.Second, "signal c1 killed": 4 * time.Second} {
			if at := rt.When(call); at.IsZero() || at.Sub(t1) != want {
				t.Errorf("%s %v after StopPod, want %v (calls %q)", call, at.Sub(t1), want, rt.Calls("signal"))
			}
		}
	})
}

// The CRI's stop comes while the worker's sync that begins the pod's 60 s
// stop (its manifest removed and written again) has taken its mail but not
// yet begun the kill (here: held in the SandboxStatus of beforeApply). The
// kill still ends within the hold's grace period.
func TestStopPodBeforeTheKillBegins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.stubborn["a"] = true
		h := start(t, rt, Config{})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		sixty := int64(60)
		pod.Spec.TerminationGracePeriodSeconds = &sixty
		h.send([]manifest.Pod{pod})
		rt.mu.Lock()
		rt.sandboxGate = make(chan struct{})
		rt.mu.Unlock()
		pod.Recreated = 1
		h.send([]manifest.Pod{pod}) // the worker is held in SandboxStatus
		w := h.a.workerOf("u1")
		for {
			// Until the sync held is the one that took the recreate.
			w.mu.Lock()
			taken := w.box.recreate == ""
			w.mu.Unlock()
			if taken {
				break
			}
			rt.mu.Lock()
			close(rt.sandboxGate)
			rt.sandboxGate = make(chan struct{})
			rt.mu.Unlock()
			w.nudge()
			synctest.Wait()
		}
		if got := rt.Calls("signal"); len(got) != 0 {
			t.Fatalf("signals %q before the kill", got)
		}
		t1 := time.Now()
		done := make(chan error, 1)
		go func() { done <- h.stopPodWithin(2*time.Minute, "u1") }()
		synctest.Wait()
		rt.mu.Lock()
		close(rt.sandboxGate)
		rt.sandboxGate = nil
		rt.mu.Unlock()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if at := rt.When("signal c1 killed"); at.IsZero() || at.Sub(t1) != manifest.MinimumGracePeriod {
			t.Errorf("SIGKILL %v after StopPod, want %v (calls %q)", at.Sub(t1), manifest.MinimumGracePeriod, rt.Calls("signal"))
		}
	})
}

// A preStop hook cut by StopPod is given up at the stop's grace period
// (raised to the minimum), logged as not completed in its grace period,
// with no FailedPreStopHook event; the container then gets the minimum
// after its stop signal.
func TestStopPodCutsAHookQuietly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.execFunc = scriptedExec
		rt.stubborn["a"] = true
		h := start(t, rt, Config{})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, withHooks(ctr("a", "busybox"), nil, []string{"hang"}))
		sixty := int64(60)
		pod.Spec.TerminationGracePeriodSeconds = &sixty
		h.send([]manifest.Pod{pod})
		h.send(nil)
		time.Sleep(5 * time.Second)
		t1 := time.Now()
		if err := h.stopPodWithin(time.Minute, "u1"); err != nil {
			t.Fatal(err)
		}
		if at := rt.When("signal c1 killed"); at.IsZero() || at.Sub(t1) != 2*manifest.MinimumGracePeriod {
			t.Errorf("SIGKILL %v after StopPod, want the hook given up at %v and %v more (calls %q)", at.Sub(t1), manifest.MinimumGracePeriod, manifest.MinimumGracePeriod, rt.Calls("signal"))
		}
		if slices.Contains(h.reasons(), "FailedPreStopHook") {
			t.Errorf("FailedPreStopHook event; events %q", h.reasons())
		}
		if !strings.Contains(h.logs.String(), "preStop hook not completed in grace period") {
			t.Errorf("the hook cut short is not logged as not completed in its grace period")
		}
	})
}

// Both pods removed: etcd waits for the API server (which starts after it)
// to stop with its 60 s. StopPod of etcd while it waits its turn: once its
// kill begins it gets the minimum, the CRI stop's grace having passed, not
// etcd's 60 s.
func TestStopPodOfAPodWaitingItsStopTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, rt, _, etcdCtr := removeEtcdBehindItsAPIServer(t, nil)
		t1 := time.Now()
		if err := h.stopPodWithin(5*time.Minute, "ue"); err != nil {
			t.Fatal(err)
		}
		if term := rt.When("signal " + etcdCtr + " terminated"); term.Sub(t1) != 55*time.Second {
			t.Errorf("etcd's stop signal %v after StopPod, want 55s: after the API server's stop, which is not cut", term.Sub(t1))
		}
		killedWithin(t, rt, etcdCtr, manifest.MinimumGracePeriod)
	})
}

// Once the CRI's hold is lifted and the pod runs again, its stops have
// their own grace period again: the cut ended with the hold, here one whose
// teardown had not finished (the pod's volumes could not be removed).
func TestStopPodsCutEndsWithItsHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.stubborn["a"] = true
		h := start(t, rt, Config{})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		sixty := int64(60)
		pod.Spec.TerminationGracePeriodSeconds = &sixty
		h.send([]manifest.Pod{pod})
		rt.mu.Lock()
		rt.volumesErr = errors.New("device or resource busy")
		rt.mu.Unlock()
		if err := h.stopPodWithin(5*time.Second, "u1"); err == nil {
			t.Fatal("StopPod returned while the pod's volumes were not removed")
		}
		time.Sleep(stopHold)
		synctest.Wait()
		rt.mu.Lock()
		rt.volumesErr = nil
		rt.mu.Unlock()
		time.Sleep(time.Minute)
		synctest.Wait()
		running := rt.Running()
		if len(running) != 1 {
			t.Fatalf("running %q once the hold ended, want the pod made again", running)
		}
		t1 := time.Now()
		h.send(nil)
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		if at := rt.When("signal " + running[0] + " killed"); at.IsZero() || at.Sub(t1) != time.Minute {
			t.Errorf("SIGKILL %v after the manifest's removal, want the pod's own 60s (calls %q)", at.Sub(t1), rt.Calls("signal"))
		}
	})
}

// Both manifests removed: etcd waits for the API server's 60 s stop. A CRI
// stop of etcd (its caller gives up) cuts etcd's stop. The manifests are
// written back before etcd's turn: etcd was never stopped and runs on. The
// cut ended there: a later removal, or a liveness probe's restart, gives
// etcd its own 60 s.
func TestStopPodsCutEndsWhenThePodIsWantedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, rt, pods, etcdCtr := removeEtcdBehindItsAPIServer(t, nil)
		if err := h.stopPodWithin(time.Second, "ue"); err == nil {
			t.Fatal("StopPod returned while etcd waits its turn")
		}
		h.send(pods)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := containerOf(rt, "ue"); got != etcdCtr {
			t.Fatalf("etcd's container %q, want %q still running", got, etcdCtr)
		}
		h.send(nil)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		killedWithin(t, rt, etcdCtr, time.Minute)
	})
}

// As above, the later kill being a liveness probe's restart.
func TestStopPodsCutEndsWhenThePodIsWantedAgainLiveness(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, rt, pods, etcdCtr := removeEtcdBehindItsAPIServer(t, httpProbe("/live", 1, 1))
		_ = h.stopPodWithin(time.Second, "ue")
		h.send(pods)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		rt.SetHealth("/live", 500)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		killedWithin(t, rt, etcdCtr, time.Minute)
	})
}

// Evicted, with a StopPod beside it (before it, refused its hold, or after
// it, replacing the hold), the eviction lifted: the pod's later liveness
// kill has the pod's own 60 s.
func TestEvictionsCutEndsWithItsLift(t *testing.T) {
	for _, name := range []string{"evict+stop", "stop+evict"} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newFakeRuntime()
				rt.stubborn["a"] = true
				rt.SetHealth("/live", 200)
				h := start(t, rt, Config{})
				c := ctr("a", "busybox")
				c.LivenessProbe = httpProbe("/live", 1, 1)
				pod := testPod("web", "u1", v1.RestartPolicyAlways, c)
				sixty := int64(60)
				pod.Spec.TerminationGracePeriodSeconds = &sixty
				h.send([]manifest.Pod{pod})
				time.Sleep(time.Second)
				synctest.Wait()
				w := h.a.workerOf("u1")
				evict := func() {
					w.setEviction("u1", &stopRequest{reason: reasonEvicted, message: "low", grace: 3 * time.Second})
				}
				if name == "evict+stop" {
					evict()
					_ = h.stopPodWithin(30*time.Second, "u1")
				} else {
					go h.stopPodWithin(30*time.Second, "u1")
					synctest.Wait()
					evict()
				}
				time.Sleep(time.Minute)
				synctest.Wait()
				w.setEviction("", nil)
				time.Sleep(time.Minute)
				synctest.Wait()
				running := rt.Running()
				if len(running) != 1 {
					t.Fatalf("running %q once the eviction was lifted, want the pod again", running)
				}
				rt.SetHealth("/live", 500)
				time.Sleep(5 * time.Minute)
				synctest.Wait()
				term, kill := rt.When("signal "+running[0]+" terminated"), rt.When("signal "+running[0]+" killed")
				if term.IsZero() || kill.Sub(term) != time.Minute {
					t.Errorf("the liveness kill's SIGKILL %v after its stop signal, want the pod's own 60s (signals %q)", kill.Sub(term), rt.Calls("signal"))
				}
			})
		})
	}
}

// As TestStopPodCutsTheSidecarsStopToo, the manifest being written back
// 1 s after StopPod, while the app's cut kill still runs. The removal goes
// on (its kills, destroys and teardown were planned already): the sidecar
// is killed after the app, and the CRI's stop still has it killed within
// the minimum, not with what is left of its 60 s.
func TestStopPodsCutHoldsThroughAWriteBackMidStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, rt, pod := removeAppAndSidecar(t)
		t1 := time.Now()
		_ = h.stopPodWithin(time.Second, "u1") // the caller gives up
		h.send([]manifest.Pod{pod})            // written back while the app's kill runs
		time.Sleep(3 * time.Minute)
		synctest.Wait()
		if at := rt.When("signal c2 killed"); at.Sub(t1) != 2*time.Second {
			t.Fatalf("app SIGKILL %v after StopPod, want 2s (calls %q)", at.Sub(t1), rt.Calls("signal"))
		}
		term, kill := rt.When("signal c1 terminated"), rt.When("signal c1 killed")
		if term.IsZero() || kill.Sub(term) != manifest.MinimumGracePeriod {
			t.Errorf("sidecar SIGKILL %v after its stop signal (%v after StopPod), want %v: the stop under way lost its cut (calls %q)",
				kill.Sub(term), term.Sub(t1), manifest.MinimumGracePeriod, rt.Calls("signal"))
		}
	})
}

// StopPod's steps, with a reconcile between its workerOf (the pod not
// desired: no hold) and its cutKills, as a.mu allows (reconcile runs under
// a.mu; StopPod releases a.mu between the two): the cut recorded on a pod
// desired again and held by nothing ends at the worker's next sync, and a
// later removal gives etcd its own 60 s.
func TestStopPodsCutRacingAWriteBackEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h, rt, pods, etcdCtr := removeEtcdBehindItsAPIServer(t, nil)
		synctest.Wait()
		// StopPod: <-a.reconciled; workerOf(uid) == nil: no hold.
		if w := h.a.workerOf("ue"); w != nil {
			t.Fatal("etcd still desired")
		}
		// The reconcile of the manifests written back, under a.mu.
		h.send(pods)
		synctest.Wait()
		// StopPod goes on: a.cutKills(uid, req).
		h.a.cutKills("ue", &stopRequest{reason: reasonStoppedByRuntime, grace: stopSandboxGrace})
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if got := containerOf(rt, "ue"); got != etcdCtr {
			t.Fatalf("etcd's container %q, want %q still running", got, etcdCtr)
		}
		h.send(nil)
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		killedWithin(t, rt, etcdCtr, time.Minute)
	})
}

// The eviction manager's lift ends evictions only: a CRI hold that
// replaced an eviction (the pod evicted, its manifest then edited to a new
// UID, and that pod stopped through the CRI) stays until its own lift.
func TestEvictionLiftKeepsACRIHold(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		w := h.a.workerOf("u1")
		w.setEviction("u1", &stopRequest{reason: reasonEvicted, message: "low on memory", grace: time.Second})
		time.Sleep(time.Minute)
		synctest.Wait()
		h.send([]manifest.Pod{testPod("web", "u2", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		synctest.Wait()
		if err := h.stopPodWithin(30*time.Second, "u2"); err != nil {
			t.Fatal(err)
		}
		starts := len(rt.Calls("start"))
		w.setEviction("", nil) // pressure gone: the eviction manager lifts what it evicted
		time.Sleep(stopHold / 2)
		synctest.Wait()
		if got := rt.Calls("start"); len(got) != starts {
			t.Errorf("starts %q: the pod stopped through the CRI started again within its hold", got[starts:])
		}
		time.Sleep(stopHold)
		synctest.Wait()
		if got := rt.Running(); len(got) != 1 {
			t.Errorf("running %q once the hold ended, want the pod again", got)
		}
	})
}

// removeEtcdBehindItsAPIServer runs etcd (ue) and an API server (ua) that
// starts after it, each with 60 s of grace and a container that ignores
// SIGTERM, etcd's with the liveness probe live if not nil; then removes both
// manifests and waits 5 s: the API server stops first, etcd waits its turn.
// It returns the two pods and etcd's container.
func removeEtcdBehindItsAPIServer(t *testing.T, live *v1.Probe) (*harness, *fakeRuntime, []manifest.Pod, string) {
	t.Helper()
	rt := newFakeRuntime()
	rt.stubborn["slow"] = true
	rt.stubborn["e"] = true
	rt.SetHealth("/live", 200)
	h := start(t, rt, Config{})
	sixty := int64(60)
	e := ctr("e", "busybox")
	e.LivenessProbe = live
	etcd := testPod("etcd", "ue", v1.RestartPolicyAlways, e)
	etcd.Spec.TerminationGracePeriodSeconds = &sixty
	api := startAfter(testPod("apiserver", "ua", v1.RestartPolicyAlways, ctr("slow", "busybox")), "etcd")
	api.Spec.TerminationGracePeriodSeconds = &sixty
	pods := []manifest.Pod{etcd, api}
	h.send(pods)
	time.Sleep(time.Second)
	synctest.Wait()
	etcdCtr := containerOf(rt, "ue")
	h.send(nil)
	time.Sleep(5 * time.Second)
	return h, rt, pods, etcdCtr
}

// killedWithin fails the test unless container id got SIGKILL grace after
// its stop signal.
func killedWithin(t *testing.T, rt *fakeRuntime, id string, grace time.Duration) {
	t.Helper()
	term, kill := rt.When("signal "+id+" terminated"), rt.When("signal "+id+" killed")
	if term.IsZero() || kill.Sub(term) != grace {
		t.Errorf("%s's SIGKILL %v after its stop signal, want %v (signals %q)", id, kill.Sub(term), grace, rt.Calls("signal"))
	}
}

// removeAppAndSidecar runs pod web (u1): an app container (c2) and a
// sidecar (c1), both ignoring SIGTERM, 60 s of grace; then removes its
// manifest and waits 5 s: the app's stop is under way, the sidecar's turn
// to come.
func removeAppAndSidecar(t *testing.T) (*harness, *fakeRuntime, manifest.Pod) {
	t.Helper()
	rt := newFakeRuntime()
	rt.stubborn["app"] = true
	rt.stubborn["proxy"] = true
	h := start(t, rt, Config{})
	pod := withInit(testPod("web", "u1", v1.RestartPolicyAlways, ctr("app", "busybox")), sidecar("proxy"))
	sixty := int64(60)
	pod.Spec.TerminationGracePeriodSeconds = &sixty
	h.send([]manifest.Pod{pod})
	time.Sleep(time.Second)
	synctest.Wait()
	h.send(nil)
	time.Sleep(5 * time.Second)
	return h, rt, pod
}
