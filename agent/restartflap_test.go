package agent

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// e2eProbe is the probe of the node e2e suite's "MirrorPod when kubelet
// restarts" pod: an exec of /bin/true, after a second, every second.
func e2eProbe() *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{"/bin/true"}}},
		InitialDelaySeconds: 1, PeriodSeconds: 1}
}

// statusRecorder keeps every status the agent generates.
type statusRecorder struct {
	mu  sync.Mutex
	all []v1.PodStatus
}

func recordStatuses(t *testing.T) *statusRecorder {
	r := &statusRecorder{}
	statusGenerated = func(s, _ *v1.PodStatus) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.all = append(r.all, *s.DeepCopy())
	}
	t.Cleanup(func() { statusGenerated = nil })
	return r
}

func (r *statusRecorder) take() []v1.PodStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.all
	r.all = nil
	return out
}

// shown is what a watcher of the mirror pod sees of a status, its times
// to the second as the API server keeps them.
func shown(t *testing.T, s v1.PodStatus) string {
	t.Helper()
	s = *s.DeepCopy()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var round v1.PodStatus
	if err := json.Unmarshal(b, &round); err != nil {
		t.Fatal(err)
	}
	b, _ = json.Marshal(round)
	return string(b)
}

// restartUnder runs pod under one daemon until it settled (wait), stops
// that daemon, starts another on what it left (the runtime, the root dir)
// and lets it run wait again. It returns the status the first daemon
// showed last and every status the second one generated.
func restartUnder(t *testing.T, root string, rt *fakeRuntime, pod manifest.Pod, wait time.Duration) (v1.PodStatus, []v1.PodStatus, *harness) {
	t.Helper()
	paths := manifest.Paths{RootDir: root}
	h1 := start(t, rt, Config{Paths: paths, Seen: NewSeenStore(paths)})
	h1.send([]manifest.Pod{pod})
	time.Sleep(wait)
	synctest.Wait()
	before := h1.pod(pod.Name[:len(pod.Name)-len("-"+testNode)]).Status
	if condition(v1.Pod{Status: before}, v1.PodReady).Status != v1.ConditionTrue {
		t.Fatalf("not Ready before the restart: %+v", before)
	}
	h1.stop()
	time.Sleep(11 * time.Second) // as the e2e test waits

	rec := recordStatuses(t)
	h2 := start(t, rt, Config{Paths: paths, Seen: NewSeenStore(paths)})
	h2.send([]manifest.Pod{pod})
	time.Sleep(wait)
	synctest.Wait()
	all := rec.take()
	if len(all) == 0 {
		t.Fatal("no status generated after the restart")
	}
	if got := rt.Calls("signal"); len(got) != 0 {
		t.Errorf("runtime calls = %q, want no container stopped", got)
	}
	return before, all, h2
}

// flap is what the node e2e test fails on in a status a watcher sees after
// a daemon restart, "" for nothing: a phase not Running, a container
// restarted, not started or not ready.
func flap(s v1.PodStatus) string {
	if s.Phase != v1.PodRunning {
		return "phase " + string(s.Phase)
	}
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0 {
				continue // an init container that completed
			}
			switch {
			case cs.RestartCount > 0:
				return cs.Name + " restarted"
			case cs.Started == nil || !*cs.Started:
				return cs.Name + " not started"
			case !cs.Ready:
				return cs.Name + " not ready"
			}
		}
	}
	return ""
}

// A daemon restart under a running, Ready pod with startup and readiness
// probes (the node e2e suite's "MirrorPod when kubelet restarts should not
// change container status"): every status the new daemon makes of the pod
// is the one the daemon before it showed last, field for field.
func TestDaemonRestartKeepsStatus(t *testing.T) {
	root := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		c := ctr("container", "busybox", "sleep", "3600")
		c.StartupProbe, c.ReadinessProbe = e2eProbe(), e2eProbe()
		pod := testPod("static", "u1", v1.RestartPolicyAlways, c)
		before, all, h2 := restartUnder(t, root, rt, pod, 20*time.Second)
		want := shown(t, before)
		for i, s := range all {
			if got := shown(t, s); got != want {
				t.Errorf("status %d of %d after the restart:\n got %s\nwant %s", i+1, len(all), got, want)
			}
		}

		// A condition that moves after the restart moves, and the next
		// daemon keeps its new time.
		rt.mu.Lock()
		rt.execCode = 1
		rt.mu.Unlock()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		unready := h2.pod("static").Status
		ready := condition(v1.Pod{Status: unready}, v1.PodReady)
		if ready.Status != v1.ConditionFalse || !ready.LastTransitionTime.After(condition(v1.Pod{Status: before}, v1.PodReady).LastTransitionTime.Time) {
			t.Fatalf("Ready after the readiness probe failed = %+v", ready)
		}
		h2.stop()
		time.Sleep(11 * time.Second)
		rec := recordStatuses(t)
		paths := manifest.Paths{RootDir: root}
		h3 := start(t, rt, Config{Paths: paths, Seen: NewSeenStore(paths)})
		h3.send([]manifest.Pod{pod})
		first := rec.take()
		if len(first) == 0 {
			t.Fatal("no status generated after the second restart")
		}
		for _, typ := range []v1.PodConditionType{v1.PodReady, v1.ContainersReady, v1.PodInitialized} {
			got, want := condition(v1.Pod{Status: first[0]}, typ), condition(v1.Pod{Status: unready}, typ)
			if got.Status != want.Status || got.LastTransitionTime.Unix() != want.LastTransitionTime.Unix() {
				t.Errorf("%s after the second restart = %s since %v, want %s since %v", typ, got.Status, got.LastTransitionTime, want.Status, want.LastTransitionTime)
			}
		}
	})
}

// The pods of the e2e test's kind, with what else a container may have
// across a daemon restart: no status the new daemon makes shows one of
// them restarted, unstarted or unready.
func TestDaemonRestartNoFlap(t *testing.T) {
	withPostStart := func(c v1.Container) v1.Container {
		c.Lifecycle = &v1.Lifecycle{PostStart: &v1.LifecycleHandler{Exec: &v1.ExecAction{Command: []string{"/bin/true"}}}}
		return c
	}
	probed := func(name string) v1.Container {
		c := ctr(name, "busybox", "sleep", "3600")
		c.StartupProbe, c.ReadinessProbe = e2eProbe(), e2eProbe()
		return c
	}
	always := v1.ContainerRestartPolicyAlways
	cases := map[string]func() manifest.Pod{
		"postStart": func() manifest.Pod {
			return testPod("static", "u1", v1.RestartPolicyAlways, withPostStart(probed("container")))
		},
		"liveness": func() manifest.Pod {
			c := probed("container")
			c.LivenessProbe = e2eProbe()
			return testPod("static", "u1", v1.RestartPolicyAlways, c)
		},
		"readiness only": func() manifest.Pod {
			c := probed("container")
			c.StartupProbe = nil
			return testPod("static", "u1", v1.RestartPolicyAlways, c)
		},
		"sidecar and init": func() manifest.Pod {
			p := testPod("static", "u1", v1.RestartPolicyAlways, probed("container"))
			side := probed("side")
			side.RestartPolicy = &always
			p.Spec.InitContainers = []v1.Container{ctr("init", "busybox", "true"), side}
			return p
		},
		"two containers": func() manifest.Pod {
			return testPod("static", "u1", v1.RestartPolicyAlways, probed("a"), withPostStart(probed("b")))
		},
	}
	for name, pod := range cases {
		t.Run(name, func(t *testing.T) {
			root := t.TempDir()
			synctest.Test(t, func(t *testing.T) {
				rt := newFakeRuntime()
				rt.crash["init"] = 0
				_, all, _ := restartUnder(t, root, rt, pod(), 20*time.Second)
				for i, s := range all {
					if why := flap(s); why != "" {
						t.Errorf("status %d of %d after the restart: %s: %+v", i+1, len(all), why, s)
					}
				}
			})
		})
	}
}

// A pod whose manifest is removed while one of its probes is in flight is
// shown Terminating at once: the worker does not wait for that probe to wind
// down (an exec slow to die once cancelled) before it says so.
func TestRemovedPodShownTerminatingWhileProbeWindsDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		var slow sync.Mutex
		slowing := false
		rt.execFunc = func(ctx context.Context, _ podspec.ContainerStatus, _ podspec.ExecSpec) (int, error) {
			slow.Lock()
			s := slowing
			slow.Unlock()
			if s {
				<-ctx.Done()
				time.Sleep(5 * time.Second) // dies slowly
			}
			return 0, nil
		}
		c := ctr("container", "busybox", "sleep", "3600")
		c.ReadinessProbe = e2eProbe()
		c.ReadinessProbe.TimeoutSeconds = 30
		pod := testPod("static", "u1", v1.RestartPolicyAlways, c)
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{pod})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if condition(h.pod("static"), v1.PodReady).Status != v1.ConditionTrue {
			t.Fatalf("not Ready: %+v", h.pod("static").Status)
		}
		slow.Lock()
		slowing = true
		slow.Unlock()
		time.Sleep(2 * time.Second) // a probe is in flight
		synctest.Wait()
		removed := time.Now()
		h.send(nil)
		if p := h.pod("static"); p.DeletionTimestamp == nil {
			t.Errorf("pod removed %v ago not shown Terminating while its probe winds down", time.Since(removed))
		}
	})
}

// A container that restarted (its instance before replaced and removed)
// keeps its lastState across a daemon restart, as the kubelet's, which
// keeps the dead container, does: the new daemon shows the status the one
// before it showed last.
func TestDaemonRestartKeepsLastState(t *testing.T) {
	root := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		c := ctr("container", "busybox", "sleep", "3600")
		c.StartupProbe, c.ReadinessProbe = e2eProbe(), e2eProbe()
		pod := testPod("static", "u1", v1.RestartPolicyAlways, c)
		paths := manifest.Paths{RootDir: root}
		h1 := start(t, rt, Config{Paths: paths, Seen: NewSeenStore(paths)})
		h1.send([]manifest.Pod{pod})
		time.Sleep(20 * time.Second)
		synctest.Wait()
		first := h1.pod("static").Status.ContainerStatuses[0].ContainerID
		rt.Exit(strings.TrimPrefix(first, containerIDPrefix), 1)
		time.Sleep(40 * time.Second)
		synctest.Wait()
		before := h1.pod("static").Status
		if cs := before.ContainerStatuses[0]; cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil ||
			cs.LastTerminationState.Terminated.ContainerID != first || !cs.Ready {
			t.Fatalf("before the restart: %+v", cs)
		}
		h1.stop()
		time.Sleep(11 * time.Second)

		rec := recordStatuses(t)
		h2 := start(t, rt, Config{Paths: paths, Seen: NewSeenStore(paths)})
		h2.send([]manifest.Pod{pod})
		time.Sleep(20 * time.Second)
		synctest.Wait()
		want := shown(t, before)
		all := rec.take()
		if len(all) == 0 {
			t.Fatal("no status generated after the restart")
		}
		for i, s := range all {
			if got := shown(t, s); got != want {
				t.Errorf("status %d of %d after the restart:\n got %s\nwant %s", i+1, len(all), got, want)
			}
		}
	})
}

// With the daemon stopped, its records show a pod's conditions since when
// the daemon showed them, and a restarted container's lastState, as the
// daemon showed them last.
func TestRecordsShowKeptConditionsAndLastState(t *testing.T) {
	root := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		c := ctr("container", "busybox", "sleep", "3600")
		pod := testPod("static", "u1", v1.RestartPolicyAlways, c)
		paths := manifest.Paths{RootDir: root}
		h := start(t, rt, Config{Paths: paths, Seen: NewSeenStore(paths)})
		h.send([]manifest.Pod{pod})
		time.Sleep(20 * time.Second)
		synctest.Wait()
		rt.Exit("c1", 1)
		time.Sleep(40 * time.Second)
		synctest.Wait()
		before := h.pod("static").Status
		h.stop()
		time.Sleep(time.Hour)

		cs, err := rt.List(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		pods := RecordedPods(root, cs, map[string]podspec.SandboxStatus{"u1": {}}, time.Now())
		if len(pods) != 1 {
			t.Fatalf("recorded pods: %+v", pods)
		}
		got := pods[0].Status
		for _, typ := range []v1.PodConditionType{v1.PodReady, v1.PodInitialized, v1.PodScheduled} {
			g, w := condition(v1.Pod{Status: got}, typ), condition(v1.Pod{Status: before}, typ)
			if g.Status != w.Status || g.LastTransitionTime.Unix() != w.LastTransitionTime.Unix() {
				t.Errorf("%s recorded %s since %v, the daemon showed %s since %v", typ, g.Status, g.LastTransitionTime, w.Status, w.LastTransitionTime)
			}
		}
		if g, w := got.ContainerStatuses[0].LastTerminationState, before.ContainerStatuses[0].LastTerminationState; w.Terminated == nil ||
			g.Terminated == nil || g.Terminated.ContainerID != w.Terminated.ContainerID || g.Terminated.ExitCode != w.Terminated.ExitCode {
			t.Errorf("lastState recorded %+v, the daemon showed %+v", g, w)
		}
	})
}

// The first status a restarted daemon makes of a pod found running has the
// pod's IPs: no status shows the pod off the network across the restart
// (an endpoint dropped for it meanwhile).
func TestDaemonRestartKeepsPodIP(t *testing.T) {
	root := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.podIPs = map[string][]netip.Addr{"u1": {netip.MustParseAddr("10.88.0.5")}}
		c := ctr("container", "busybox", "sleep", "3600")
		c.StartupProbe, c.ReadinessProbe = e2eProbe(), e2eProbe()
		before, all, _ := restartUnder(t, root, rt, testPod("static", "u1", v1.RestartPolicyAlways, c), 20*time.Second)
		want := shown(t, before)
		for i, s := range all {
			if got := shown(t, s); got != want {
				t.Errorf("status %d of %d after the restart:\n got %s\nwant %s", i+1, len(all), got, want)
			}
		}
	})
}

// With the daemon stopped during a container's postStart hook, its records
// show the container not started and not ready, as the next daemon shows
// it while it runs the hook again.
func TestRecordsShowContainerInPostStartUnstarted(t *testing.T) {
	root := t.TempDir()
	at := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	cs := []podspec.ContainerStatus{
		{ID: "c1", PodUID: "u1", PodName: "web-node1", PodNamespace: "default", Name: "main", Attempt: 2,
			State: podspec.StateRunning, CreatedAt: at, StartedAt: at},
		{ID: "c2", PodUID: "u1", PodName: "web-node1", PodNamespace: "default", Name: "side", Attempt: 0,
			State: podspec.StateRunning, CreatedAt: at, StartedAt: at},
	}
	file := poddir.Root(root).PostStartMark("u1", "main", 2)
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	pods := RecordedPods(root, cs, map[string]podspec.SandboxStatus{"u1": {}}, at.Add(time.Hour))
	if len(pods) != 1 || len(pods[0].Status.ContainerStatuses) != 2 {
		t.Fatalf("recorded pods: %+v", pods)
	}
	for _, s := range pods[0].Status.ContainerStatuses {
		started := s.Started != nil && *s.Started
		if want := s.Name == "side"; started != want || s.Ready != want {
			t.Errorf("%s recorded started %v, ready %v; want %v", s.Name, started, s.Ready, want)
		}
	}
}

// A last.json whose entry for a container names an instance the runtime
// still has, of another container, is not that container's replaced
// instance: the daemon after a restart shows no lastState from it, and
// says why it refused it.
func TestDaemonRestartRefusesLastStateOfAnotherContainer(t *testing.T) {
	root := t.TempDir()
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		pod := testPod("static", "u1", v1.RestartPolicyAlways, ctr("a", "busybox", "sleep", "3600"), ctr("b", "busybox", "sleep", "3600"))
		paths := manifest.Paths{RootDir: root}
		h1 := start(t, rt, Config{Paths: paths, Seen: NewSeenStore(paths)})
		h1.send([]manifest.Pod{pod})
		time.Sleep(20 * time.Second)
		synctest.Wait()
		ids := map[string]string{}
		for _, cs := range h1.pod("static").Status.ContainerStatuses {
			ids[cs.Name] = strings.TrimPrefix(cs.ContainerID, containerIDPrefix)
		}
		rt.Exit(ids["a"], 1)
		time.Sleep(40 * time.Second)
		synctest.Wait()
		h1.stop()

		// last.json says a's instance before the running one is b's.
		file := poddir.Root(root).Last("u1")
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var last map[string]podspec.ContainerStatus
		if err := json.Unmarshal(b, &last); err != nil {
			t.Fatal(err)
		}
		a := last["a"]
		if a.ID != ids["a"] {
			t.Fatalf("last.json before: %s", b)
		}
		a.ID = ids["b"]
		last["a"] = a
		if b, err = json.Marshal(last); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, b, 0o600); err != nil {
			t.Fatal(err)
		}

		h2 := start(t, rt, Config{Paths: paths, Seen: NewSeenStore(paths)})
		h2.send([]manifest.Pod{pod})
		for _, cs := range h2.pod("static").Status.ContainerStatuses {
			if t1 := cs.LastTerminationState.Terminated; t1 != nil && t1.ContainerID == containerIDPrefix+ids["b"] {
				t.Errorf("%s shows lastState of b's running instance: %+v", cs.Name, t1)
			}
		}
		if !strings.Contains(h2.logs.String(), "cannot read the replaced instances") {
			t.Errorf("no warning of the refused lastState:\n%s", h2.logs.String())
		}
	})
}
