package agent

import (
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/prober"
)

func httpProbe(path string, period, failures int32) *v1.Probe {
	return &v1.Probe{
		ProbeHandler:     v1.ProbeHandler{HTTPGet: &v1.HTTPGetAction{Path: path, Port: intstr.FromInt32(8080)}},
		TimeoutSeconds:   1,
		PeriodSeconds:    period,
		SuccessThreshold: 1,
		FailureThreshold: failures,
	}
}

func condition(p v1.Pod, t v1.PodConditionType) v1.PodCondition {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			return c
		}
	}
	return v1.PodCondition{}
}

// Readiness drives containerStatuses[].ready and the Ready and
// ContainersReady conditions, with their transition times; the container
// keeps running throughout.
func TestReadinessProbeDrivesReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.SetHealth("/ready", 503)
		h := start(t, rt, Config{})
		c := ctr("web", "busybox")
		c.ReadinessProbe = httpProbe("/ready", 10, 3)
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, c)})

		p := h.pod("web")
		cs := p.Status.ContainerStatuses[0]
		if cs.State.Running == nil || cs.Ready || !*cs.Started {
			t.Fatalf("before a passing probe: %+v, want running, started, not ready", cs)
		}
		if got := condition(p, v1.PodReady); got.Status != v1.ConditionFalse || got.Reason != "ContainersNotReady" {
			t.Errorf("Ready condition %+v", got)
		}
		notReadySince := condition(p, v1.ContainersReady).LastTransitionTime

		rt.SetHealth("/ready", 200)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		p = h.pod("web")
		if !p.Status.ContainerStatuses[0].Ready || condition(p, v1.PodReady).Status != v1.ConditionTrue {
			t.Fatalf("after a passing probe: %+v", p.Status)
		}
		if got := condition(p, v1.ContainersReady).LastTransitionTime; !got.After(notReadySince.Time) {
			t.Errorf("ContainersReady transition time %v did not move past %v", got, notReadySince)
		}
		readySince := condition(p, v1.PodReady).LastTransitionTime

		// Three failures in a row make it unready again; one does not.
		rt.SetHealth("/ready", 500)
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if p = h.pod("web"); !p.Status.ContainerStatuses[0].Ready || condition(p, v1.PodReady).LastTransitionTime != readySince {
			t.Errorf("unready after two failures: %+v", p.Status)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if p = h.pod("web"); p.Status.ContainerStatuses[0].Ready {
			t.Errorf("ready after three failures")
		}
		if got := len(rt.Calls("start")); got != 1 {
			t.Errorf("readiness restarted the container: %d starts", got)
		}
		if !slices.Contains(rt.dials, "u1 127.0.0.1:8080") {
			t.Errorf("dials %q, want the pod's own 127.0.0.1:8080", rt.dials)
		}
	})
}

// A liveness probe failing past its threshold kills the container with the
// probe's grace period and restarts it, as a crash (the kubelet's
// computePodActions): with OnFailure even when it exits 0 on SIGTERM, and
// never with Never.
func TestLivenessProbeRestarts(t *testing.T) {
	for _, tc := range []struct {
		policy   v1.RestartPolicy
		restarts bool
	}{
		{v1.RestartPolicyAlways, true},
		{v1.RestartPolicyOnFailure, true},
		{v1.RestartPolicyNever, false},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newFakeRuntime()
				rt.SetHealth("/live", 200)
				h := start(t, rt, Config{})
				c := ctr("app", "busybox")
				c.LivenessProbe = httpProbe("/live", 1, 3)
				grace := int64(7)
				c.LivenessProbe.TerminationGracePeriodSeconds = &grace
				rt.stubborn["app"] = true // ignores SIGTERM: the probe's grace is what it gets
				h.send([]manifest.Pod{testPod("app", "u1", tc.policy, c)})
				time.Sleep(5 * time.Second)
				synctest.Wait()
				if n := len(rt.Calls("signal")); n != 0 {
					t.Fatalf("killed while healthy: %q", rt.Calls("signal"))
				}
				rt.SetHealth("/live", 500)
				began := time.Now()
				time.Sleep(2500 * time.Millisecond) // two failures: not yet
				synctest.Wait()
				if n := len(rt.Calls("signal")); n != 0 {
					t.Fatalf("killed below the threshold: %q", rt.Calls("signal"))
				}
				time.Sleep(time.Second + 7*time.Second + time.Millisecond)
				synctest.Wait()
				if got, want := rt.Calls("signal"), []string{"signal c1 terminated", "signal c1 killed"}; !slices.Equal(got, want) {
					t.Fatalf("signals %q, want %q (SIGKILL after the probe's 7s)", got, want)
				}
				if took := time.Since(began); took < 9*time.Second {
					t.Errorf("killed %v after the first failure", took)
				}
				rt.SetHealth("/live", 200)
				time.Sleep(time.Second)
				synctest.Wait()
				starts := len(rt.Calls("start"))
				if (starts == 2) != tc.restarts {
					t.Errorf("%d starts, want a restart: %v", starts, tc.restarts)
				}
				cs := h.pod("app").Status.ContainerStatuses[0]
				if tc.restarts {
					if cs.State.Running == nil || cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil ||
						cs.LastTerminationState.Terminated.ExitCode != 137 {
						t.Errorf("after the restart: %+v", cs)
					}
					// The new instance is probed afresh and stays.
					time.Sleep(10 * time.Second)
					synctest.Wait()
					if n := len(rt.Calls("start")); n != 2 {
						t.Errorf("%d starts after a healthy 10s", n)
					}
				} else if cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 137 {
					t.Errorf("with Never: %+v", cs)
				}
			})
		})
	}
}

// startupProbe: not started, not ready, and no liveness or readiness probe
// until it passes; failing past its threshold restarts the container.
func TestStartupProbeGates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.SetHealth("/live", 500) // would kill it, if probed before start-up
		h := start(t, rt, Config{})
		c := ctr("app", "busybox")
		c.StartupProbe = httpProbe("/started", 1, 30)
		c.LivenessProbe = httpProbe("/live", 1, 1)
		h.send([]manifest.Pod{testPod("app", "u1", v1.RestartPolicyAlways, c)})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		cs := h.pod("app").Status.ContainerStatuses[0]
		if *cs.Started || cs.Ready || len(rt.Calls("signal")) != 0 {
			t.Fatalf("before start-up: started %v ready %v signals %q", *cs.Started, cs.Ready, rt.Calls("signal"))
		}
		rt.SetHealth("/live", 200)
		rt.SetHealth("/started", 200)
		time.Sleep(time.Second)
		synctest.Wait()
		if cs = h.pod("app").Status.ContainerStatuses[0]; !*cs.Started || !cs.Ready {
			t.Fatalf("after start-up: started %v ready %v", *cs.Started, cs.Ready)
		}

		// Another pod whose start-up never passes is restarted after
		// failureThreshold × period.
		c2 := ctr("slow", "busybox")
		c2.StartupProbe = httpProbe("/never", 2, 3)
		h.send([]manifest.Pod{testPod("app", "u1", v1.RestartPolicyAlways, c), testPod("slow", "u2", v1.RestartPolicyAlways, c2)})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if n := len(rt.Calls("signal")); n != 1 {
			t.Errorf("signals %q after 3 failed start-up probes, want one SIGTERM", rt.Calls("signal"))
		}
	})
}

// A container found running at start whose probes had passed (their marks
// kept by the daemon before) is never published unstarted or unready, not
// even by the first status of the new daemon, made before its probes run:
// an API server watching the mirror pod sees no flap across the restart (the
// node e2e suite's "MirrorPod when kubelet restarts should not change
// container status").
func TestAdoptedReadyContainerNeverPublishedUnready(t *testing.T) {
	var generated, unready atomic.Int32
	statusGenerated = func(s, _ *v1.PodStatus) {
		for _, cs := range s.ContainerStatuses {
			if cs.State.Running == nil {
				continue
			}
			generated.Add(1)
			if !cs.Ready || cs.Started == nil || !*cs.Started {
				unready.Add(1)
			}
		}
	}
	defer func() { statusGenerated = nil }()
	root := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.SetHealth("/ready", 200)
		c := ctr("web", "busybox")
		c.StartupProbe = httpProbe("/ready", 10, 1)
		c.ReadinessProbe = httpProbe("/ready", 10, 1)
		pod := testPod("web", "u1", v1.RestartPolicyAlways, c)
		started := time.Now().Add(-time.Hour)
		rt.adopt(podspec.ContainerStatus{ID: "old-web", PodUID: "u1", PodName: "web-node1", Name: "web",
			Hash: hashOf(&pod.Spec.Containers[0]), Image: "busybox", State: podspec.StateRunning, StartedAt: started, CreatedAt: started})
		marks := prober.FileMarks{File: poddir.Root(root).ProbeMark}
		for _, m := range []string{prober.MarkStarted, prober.MarkReady} {
			if err := marks.Set("u1", "old-web", m, true); err != nil {
				t.Fatal(err)
			}
		}
		h := start(t, rt, Config{Paths: manifest.Paths{RootDir: root}})
		h.send([]manifest.Pod{pod})
		time.Sleep(30 * time.Second) // the probes run, after their jitter
		synctest.Wait()
		if p := h.pod("web"); condition(p, v1.PodReady).Status != v1.ConditionTrue {
			t.Fatalf("web not Ready: %+v", p.Status)
		}
		if generated.Load() == 0 || unready.Load() != 0 {
			t.Errorf("%d of the %d statuses generated of the adopted container show it unstarted or unready", unready.Load(), generated.Load())
		}
	})
}
