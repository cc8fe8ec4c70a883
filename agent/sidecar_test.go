package agent

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

func sidecar(name string) v1.Container {
	c := ctr(name, "busybox")
	c.RestartPolicy = new(v1.ContainerRestartPolicyAlways)
	return c
}

func withInit(p manifest.Pod, init ...v1.Container) manifest.Pod {
	p.Spec.InitContainers = init
	return p
}

// Sidecars start in order with the init containers, each holding back the
// next until its startup probe passes, keep running beside the app, restart
// when they exit, and count for the pod's readiness.
func TestSidecarsStartInOrderAndKeepRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		proxy := sidecar("proxy")
		proxy.StartupProbe = httpProbe("/started", 1, 30)
		proxy.ReadinessProbe = httpProbe("/ready", 1, 1)
		rt.SetHealth("/ready", 200)
		h.send([]manifest.Pod{withInit(testPod("web", "u1", v1.RestartPolicyAlways, ctr("app", "busybox")),
			proxy, ctr("setup", "busybox"))})
		if got := rt.Calls("start"); !slices.Equal(got, []string{"start u1/proxy#0"}) {
			t.Fatalf("starts before the sidecar started: %q", got)
		}
		p := h.pod("web")
		if p.Status.Phase != v1.PodPending || condition(p, v1.PodInitialized).Status != v1.ConditionFalse {
			t.Errorf("before the sidecar started: phase %s, initialized %+v", p.Status.Phase, condition(p, v1.PodInitialized))
		}

		rt.SetHealth("/started", 200)
		time.Sleep(time.Second)
		synctest.Wait()
		if got := rt.Calls("start"); !slices.Equal(got, []string{"start u1/proxy#0", "start u1/setup#0"}) {
			t.Fatalf("starts once the sidecar started: %q", got)
		}
		rt.Exit("c2", 0) // setup done
		synctest.Wait()
		if got := rt.Calls("start"); len(got) != 3 || got[2] != "start u1/app#0" {
			t.Fatalf("starts once setup finished: %q", got)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		p = h.pod("web")
		sc := p.Status.InitContainerStatuses[0]
		if p.Status.Phase != v1.PodRunning || !ready(p) || sc.State.Running == nil || !sc.Ready || !*sc.Started {
			t.Fatalf("running: phase %s ready %v, sidecar %+v", p.Status.Phase, ready(p), sc)
		}

		// The sidecar goes unready: so does the pod.
		rt.SetHealth("/ready", 500)
		time.Sleep(time.Second)
		synctest.Wait()
		if p = h.pod("web"); ready(p) || !strings.Contains(condition(p, v1.PodReady).Message, "proxy") {
			t.Errorf("unready sidecar: pod Ready %+v", condition(p, v1.PodReady))
		}
		rt.SetHealth("/ready", 200)

		// The sidecar exits: restarted, without touching the app.
		rt.Exit("c1", 1)
		synctest.Wait()
		if got := rt.Calls("start"); len(got) != 4 || got[3] != "start u1/proxy#1" {
			t.Fatalf("starts after the sidecar exited: %q", got)
		}
		if got := rt.Calls("signal"); len(got) != 0 {
			t.Errorf("signals: %q", got)
		}
		if p = h.pod("web"); p.Status.Phase != v1.PodRunning {
			t.Errorf("phase while the sidecar restarts: %s", p.Status.Phase)
		}
	})
}

// A pod stops its app containers first, side by side, then its sidecars one
// by one, the last first.
func TestSidecarsStopLast(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{withInit(testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"), ctr("b", "busybox")),
			sidecar("s1"), sidecar("s2"))})
		if got := rt.Calls("start"); len(got) != 4 {
			t.Fatalf("starts %q", got)
		}
		h.send(nil)
		got := rt.Calls("signal")
		if len(got) != 4 {
			t.Fatalf("signals %q", got)
		}
		slices.Sort(got[:2])
		// c1 s1, c2 s2, c3 a, c4 b.
		if want := []string{"signal c3 terminated", "signal c4 terminated", "signal c2 terminated", "signal c1 terminated"}; !slices.Equal(got, want) {
			t.Errorf("signals %q, want %q", got, want)
		}
	})
}

// Under Never, once the app containers are done for good, the sidecars are
// stopped and the pod succeeds.
func TestSidecarsStopWhenTheJobIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{withInit(testPod("job", "u1", v1.RestartPolicyNever, ctr("main", "busybox")), sidecar("log"))})
		rt.Exit("c2", 0)
		synctest.Wait()
		if got := rt.Calls("signal"); !slices.Equal(got, []string{"signal c1 terminated"}) {
			t.Fatalf("signals %q, want the sidecar stopped", got)
		}
		if got := rt.Calls("start"); len(got) != 2 {
			t.Errorf("starts %q: the stopped sidecar must not restart", got)
		}
		if p := h.pod("job"); p.Status.Phase != v1.PodSucceeded {
			t.Errorf("phase %s, want Succeeded", p.Status.Phase)
		}
	})
}

func ready(p v1.Pod) bool { return condition(p, v1.PodReady).Status == v1.ConditionTrue }

// A sidecar whose image is missing waits without spinning the worker.
func TestSidecarWaitingForImageDoesNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["proxy:1"] = true
		h := start(t, rt, Config{})
		s := sidecar("proxy")
		s.Image = "proxy:1"
		h.send([]manifest.Pod{withInit(testPod("web", "u1", v1.RestartPolicyAlways, ctr("app", "busybox")), s)})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if n := len(rt.Calls("start")); n > 3 {
			t.Errorf("%d start attempts in 10s for a missing image", n)
		}
		if w := h.pod("web").Status.InitContainerStatuses[0].State.Waiting; w == nil || w.Reason != "ErrImageNeverPull" {
			t.Errorf("sidecar state %+v", h.pod("web").Status.InitContainerStatuses[0].State)
		}
	})
}
