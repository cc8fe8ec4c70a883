package agent

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/status"
)

func startAfter(p manifest.Pod, names string) manifest.Pod {
	p.Annotations = map[string]string{manifest.AnnotationStartAfter: names}
	return p
}

// callIndex is the index of the first call that starts with prefix; -1 if none.
func callIndex(rt *fakeRuntime, prefix string) int {
	return slices.IndexFunc(rt.Calls(), func(c string) bool { return strings.HasPrefix(c, prefix) })
}

// A pod that starts after another makes nothing, not even its sandbox,
// until that one is Ready; it waits as WaitingForDependency in its status,
// an event and the STATUS line; once started it keeps running when the
// other stops being Ready.
func TestStartAfterWaitsForReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.SetHealth("/ready", 503)
		h := start(t, rt, Config{})
		dep := ctr("etcd", "busybox")
		dep.ReadinessProbe = httpProbe("/ready", 10, 1)
		h.send([]manifest.Pod{
			testPod("etcd", "ua", v1.RestartPolicyAlways, dep),
			startAfter(testPod("apiserver", "ub", v1.RestartPolicyAlways, ctr("api", "busybox")), "etcd"),
		})

		if i := callIndex(rt, "sandbox ub"); i >= 0 {
			t.Fatalf("the dependent's sandbox was made before etcd was Ready: %q", rt.Calls())
		}
		w := h.pod("apiserver").Status.ContainerStatuses[0].State.Waiting
		if w == nil || w.Reason != status.WaitingForDependency || w.Message != "etcd-node1 not Ready" {
			t.Fatalf("dependent waits as %+v, want WaitingForDependency: etcd-node1 not Ready", w)
		}
		if e := h.event("WaitingForDependency"); e.Type != v1.EventTypeNormal || e.Message != "Waiting to start: etcd-node1 not Ready" {
			t.Errorf("event %s %q", e.Type, e.Message)
		}
		if s := h.a.Summary(); !strings.Contains(s, "apiserver: WaitingForDependency") {
			t.Errorf("STATUS line %q does not say the pod waits for its dependency", s)
		}

		rt.SetHealth("/ready", 200)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		readyAt := condition(h.pod("etcd"), v1.PodReady)
		if readyAt.Status != v1.ConditionTrue {
			t.Fatalf("etcd not Ready: %+v", readyAt)
		}
		if at := rt.When("sandbox ub"); at.IsZero() || at.Before(readyAt.LastTransitionTime.Time) {
			t.Fatalf("dependent's sandbox at %v, etcd Ready at %v: %q", at, readyAt.LastTransitionTime, rt.Calls())
		}
		if cs := h.pod("apiserver").Status.ContainerStatuses[0]; cs.State.Running == nil {
			t.Fatalf("dependent not running once etcd is Ready: %+v", cs.State)
		}
		if n := len(slices.DeleteFunc(h.reasons(), func(r string) bool { return r != "WaitingForDependency" })); n != 1 {
			t.Errorf("%d WaitingForDependency events, want 1", n)
		}

		// etcd turns unready: the API server keeps running.
		rt.SetHealth("/ready", 500)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if condition(h.pod("etcd"), v1.PodReady).Status == v1.ConditionTrue {
			t.Fatal("etcd still Ready")
		}
		if got := rt.Calls("signal", "start ub"); len(got) != 1 {
			t.Errorf("the dependent was stopped or restarted when etcd turned unready: %q", got)
		}

		// An edit of the API server: the old generation goes, the new one
		// waits for etcd again, with an event of its own.
		api := startAfter(testPod("apiserver", "ub2", v1.RestartPolicyAlways, ctr("api", "busybox:2")), "etcd")
		h.send([]manifest.Pod{testPod("etcd", "ua", v1.RestartPolicyAlways, dep), api})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if callIndex(rt, "rmsandbox ub") < 0 || callIndex(rt, "sandbox ub2") >= 0 {
			t.Fatalf("the edited API server did not wait for etcd: %q", rt.Calls())
		}
		if w := h.pod("apiserver").Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != status.WaitingForDependency {
			t.Errorf("the new generation waits as %+v", w)
		}
		rt.SetHealth("/ready", 200)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if callIndex(rt, "start ub2/api#0") < 0 {
			t.Errorf("the new generation did not start once etcd was Ready again: %q", rt.Calls())
		}
	})
}

// A cycle and a name no manifest defines are manifest problems; their pods
// make nothing, and the other pods run.
func TestStartAfterCycleAndUnknown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{
			startAfter(testPod("a", "ua", v1.RestartPolicyAlways, ctr("c", "busybox")), "b"),
			startAfter(testPod("b", "ub", v1.RestartPolicyAlways, ctr("c", "busybox")), "a"),
			startAfter(testPod("c", "uc", v1.RestartPolicyAlways, ctr("c", "busybox")), "nosuch"),
			testPod("d", "ud", v1.RestartPolicyAlways, ctr("c", "busybox")),
		})
		problems := map[string]string{}
		for _, p := range h.a.Problems() {
			problems[p.Origin] = problemMessage(p)
		}
		want := map[string]string{
			"/etc/kubernetes/manifests/a.yaml": "start-after makes a cycle (a, b, a)",
			"/etc/kubernetes/manifests/b.yaml": "start-after makes a cycle (a, b, a)",
			"/etc/kubernetes/manifests/c.yaml": "no manifest defines pod nosuch in namespace default",
		}
		for origin, msg := range want {
			if !strings.Contains(problems[origin], msg) || !strings.Contains(problems[origin], "metadata.annotations[staticpodd.io/start-after]") {
				t.Errorf("problem of %s: %q, want it to name the field and say %q", origin, problems[origin], msg)
			}
		}
		if len(problems) != len(want) {
			t.Errorf("problems %q", problems)
		}
		for _, uid := range []string{"ua", "ub", "uc"} {
			if i := callIndex(rt, "sandbox "+uid); i >= 0 {
				t.Errorf("pod %s started: %q", uid, rt.Calls())
			}
		}
		if cs := h.pod("d").Status.ContainerStatuses[0]; cs.State.Running == nil {
			t.Errorf("the pod outside the cycle does not run: %+v", cs.State)
		}
		if w := h.pod("c").Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != status.WaitingForDependency {
			t.Errorf("pod c waits as %+v", w)
		}

		// The missing pod comes: c starts.
		h.send([]manifest.Pod{
			startAfter(testPod("a", "ua", v1.RestartPolicyAlways, ctr("c", "busybox")), "b"),
			startAfter(testPod("b", "ub", v1.RestartPolicyAlways, ctr("c", "busybox")), "a"),
			startAfter(testPod("c", "uc", v1.RestartPolicyAlways, ctr("c", "busybox")), "nosuch"),
			testPod("d", "ud", v1.RestartPolicyAlways, ctr("c", "busybox")),
			testPod("nosuch", "un", v1.RestartPolicyAlways, ctr("c", "busybox")),
		})
		if cs := h.pod("c").Status.ContainerStatuses[0]; cs.State.Running == nil {
			t.Errorf("pod c does not run once the pod it names does: %+v", cs.State)
		}
	})
}

// Pods removed together stop dependents first, then by priority, lowest
// first: each waits for those to be gone before its own stop begins.
func TestStopOrderOfARemoval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.stubborn["slow"] = true // takes its whole grace period to stop
		h := start(t, rt, Config{})
		critical := testPod("etcd", "ue", v1.RestartPolicyAlways, ctr("c", "busybox"))
		critical.Spec.PriorityClassName = "system-node-critical"
		pods := []manifest.Pod{
			critical,
			startAfter(testPod("apiserver", "ua", v1.RestartPolicyAlways, ctr("slow", "busybox")), "etcd"),
			testPod("web", "uw", v1.RestartPolicyAlways, ctr("slow", "busybox")),
		}
		h.send(pods)
		time.Sleep(time.Second)
		synctest.Wait()
		for _, uid := range []string{"ue", "ua", "uw"} {
			if callIndex(rt, "start "+uid) < 0 {
				t.Fatalf("pod %s did not start: %q", uid, rt.Calls())
			}
		}
		etcdCtr := containerOf(rt, "ue")
		h.send(nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := len(h.a.Pods()); n != 0 {
			t.Fatalf("%d pods left", n)
		}
		etcdKill := callIndex(rt, "signal "+etcdCtr)
		apiGone := callIndex(rt, "rmsandbox ua")
		if etcdKill < 0 || apiGone < 0 || etcdKill < apiGone {
			t.Errorf("etcd was stopped before the API server that starts after it was gone: %q", rt.Calls())
		}
		// etcd is system-node-critical, web has no priority: web goes first.
		if webGone := callIndex(rt, "rmsandbox uw"); webGone < 0 || etcdKill < webGone {
			t.Errorf("etcd was stopped before web, of a lower priority: %q", rt.Calls())
		}
		if e := h.event("StoppingAfterDependents"); !strings.Contains(e.Message, "apiserver-node1") || !strings.Contains(e.Message, "web-node1") {
			t.Errorf("event %q", e.Message)
		}
	})
}

// containerOf is the ID of the first container started in pod uid.
func containerOf(rt *fakeRuntime, uid string) string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	for id, c := range rt.ctrs {
		if c.st.PodUID == uid {
			return id
		}
	}
	return "none"
}

// A directory emptied one file after the other: the pod removed first
// waits a moment for the pods that start after it, removed next, and stops
// after them; removed alone, it stops after that moment.
func TestStopOrderOfRemovalsInTurn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.stubborn["slow"] = true
		h := start(t, rt, Config{})
		etcd := testPod("etcd", "ue", v1.RestartPolicyAlways, ctr("c", "busybox"))
		api := startAfter(testPod("apiserver", "ua", v1.RestartPolicyAlways, ctr("slow", "busybox")), "etcd")
		h.send([]manifest.Pod{etcd, api})
		time.Sleep(time.Second)
		synctest.Wait()
		etcdCtr := containerOf(rt, "ue")

		h.send([]manifest.Pod{api}) // etcd.yaml goes first
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if i := callIndex(rt, "signal "+etcdCtr); i >= 0 {
			t.Fatalf("etcd stopped at once while the API server was still desired: %q", rt.Calls())
		}
		h.send(nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		if etcdKill, apiGone := callIndex(rt, "signal "+etcdCtr), callIndex(rt, "rmsandbox ua"); apiGone < 0 || etcdKill < apiGone {
			t.Errorf("etcd stopped before the API server removed after it was gone: %q", rt.Calls())
		}

		// Removed alone, a pod whose dependents stay stops after the moment.
		h.send([]manifest.Pod{etcd, api})
		time.Sleep(time.Minute)
		synctest.Wait()
		etcdCtr = containerOf(rt, "ue")
		removedAt := time.Now()
		h.send([]manifest.Pod{api})
		time.Sleep(time.Minute)
		synctest.Wait()
		if at := rt.When("signal " + etcdCtr + " terminated"); at.IsZero() || at.Sub(removedAt) > 2*time.Second {
			t.Errorf("etcd removed alone stopped at %v, %v after its removal", at, at.Sub(removedAt))
		}
		if callIndex(rt, "signal "+containerOf(rt, "ua")) >= 0 {
			t.Errorf("the API server, still desired, was stopped: %q", rt.Calls())
		}
	})
}

// run --once waits for a pod that starts after another, and fails at once
// a pod in a cycle, rather than waiting out its timeout.
func TestWaitOnceStartOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		done := make(chan []OnceResult, 1)
		go func() {
			r, _ := h.a.WaitOnce(t.Context())
			done <- r
		}()
		h.send([]manifest.Pod{
			testPod("etcd", "ue", v1.RestartPolicyAlways, ctr("c", "busybox")),
			startAfter(testPod("apiserver", "ua", v1.RestartPolicyAlways, ctr("c", "busybox")), "etcd"),
			startAfter(testPod("a", "u1", v1.RestartPolicyAlways, ctr("c", "busybox")), "a"),
		})
		var results []OnceResult
		select {
		case results = <-done:
		case <-time.After(time.Minute):
			t.Fatal("run --once did not settle")
		}
		got := map[string]string{}
		for _, r := range results {
			if r.Pod != nil {
				got[r.Pod.Name] = r.Outcome + ": " + r.Message
			} else {
				got[r.Problem.Origin] = r.Outcome
			}
		}
		if got["etcd-node1"] != OnceRunning+": " || got["apiserver-node1"] != OnceRunning+": " ||
			!strings.HasPrefix(got["a-node1"], OnceFailed+": start-after makes a cycle (a, a)") ||
			got["/etc/kubernetes/manifests/a.yaml"] != OnceInvalid {
			t.Errorf("results %q", got)
		}
	})
}

// Each container is started with the running containers of the pods its
// pod starts after (to stop before them) and of the pods that start after
// it (to stop after them), so that systemd, stopping their scopes at
// power-off, stops the dependents first: a dependency restarted after its
// dependent started carries the order itself.
func TestStopOrderForTheRuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{
			testPod("etcd", "ua", v1.RestartPolicyAlways, ctr("etcd", "busybox")),
			startAfter(testPod("apiserver", "ub", v1.RestartPolicyAlways, ctr("api", "busybox")), "etcd"),
		})
		time.Sleep(5 * time.Second)
		synctest.Wait()
		id := func(pod string) string {
			cs := h.pod(pod).Status.ContainerStatuses[0]
			if cs.State.Running == nil {
				t.Fatalf("%s not running: %+v", pod, cs.State)
			}
			return strings.TrimPrefix(cs.ContainerID, containerIDPrefix)
		}
		etcd, api := id("etcd"), id("apiserver")
		if before, after := rt.StopOrder(etcd); len(before) != 0 || len(after) != 0 {
			t.Errorf("etcd, first, started ordered before %q after %q", before, after)
		}
		if before, after := rt.StopOrder(api); !slices.Equal(before, []string{etcd}) || len(after) != 0 {
			t.Errorf("apiserver stops before %q after %q, want before [%s]", before, after, etcd)
		}

		// etcd exits and is restarted: its new container stops after the
		// API server's, which was started before it.
		rt.Exit(etcd, 1)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		etcd2 := id("etcd")
		if etcd2 == etcd {
			t.Fatal("etcd not restarted")
		}
		if before, after := rt.StopOrder(etcd2); len(before) != 0 || !slices.Equal(after, []string{api}) {
			t.Errorf("restarted etcd stops before %q after %q, want after [%s]", before, after, api)
		}
	})
}

// A pod that many pods start after orders its containers against at most
// maxStopOrdered of theirs: a start never carries thousands of unit names.
func TestStopOrderBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		pods := []manifest.Pod{testPod("etcd", "ua", v1.RestartPolicyAlways, ctr("etcd", "busybox"))}
		for i := range maxStopOrdered + 10 {
			name := fmt.Sprintf("client%d", i)
			pods = append(pods, startAfter(testPod(name, "u"+name, v1.RestartPolicyAlways, ctr("c", "busybox")), "etcd"))
		}
		h.send(pods)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		etcd := strings.TrimPrefix(h.pod("etcd").Status.ContainerStatuses[0].ContainerID, containerIDPrefix)
		rt.Exit(etcd, 1)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		etcd2 := strings.TrimPrefix(h.pod("etcd").Status.ContainerStatuses[0].ContainerID, containerIDPrefix)
		if etcd2 == etcd {
			t.Fatal("etcd not restarted")
		}
		if _, after := rt.StopOrder(etcd2); len(after) != maxStopOrdered {
			t.Errorf("restarted etcd ordered against %d containers, want %d", len(after), maxStopOrdered)
		}
	})
}

func withPriority(p manifest.Pod, class string, prio *int32) manifest.Pod {
	p.Spec.PriorityClassName, p.Spec.Priority = class, prio
	return p
}

// Each container is ordered, for systemd at power-off, against the
// running containers of the pods of another priority: after those of a
// lower one, before those of a higher one, the nearest first, as the
// kubelet's graceful node shutdown stops lower priorities first. Whichever
// container starts last carries the order, as for the start order.
func TestStopOrderByPriorityForTheRuntime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		mid := int32(1000)
		pods := []manifest.Pod{testPod("low", "ua", v1.RestartPolicyAlways, ctr("c", "busybox"))}
		id := func(pod string) string {
			cs := h.pod(pod).Status.ContainerStatuses[0]
			if cs.State.Running == nil {
				t.Fatalf("%s not running: %+v", pod, cs.State)
			}
			return strings.TrimPrefix(cs.ContainerID, containerIDPrefix)
		}
		// Started one after the other: each sees the ones before it run.
		for _, p := range []manifest.Pod{
			withPriority(testPod("mid", "ub", v1.RestartPolicyAlways, ctr("c", "busybox")), "", &mid),
			withPriority(testPod("crit", "uc", v1.RestartPolicyAlways, ctr("c", "busybox")), "system-node-critical", nil),
			{},
		} {
			h.send(pods)
			time.Sleep(5 * time.Second)
			synctest.Wait()
			if p.Pod != nil {
				pods = append(pods, p)
			}
		}
		low, m, crit := id("low"), id("mid"), id("crit")
		for _, c := range []struct {
			name, id      string
			before, after []string
		}{
			{"low", low, nil, nil},
			{"mid", m, nil, []string{low}},
			{"crit", crit, nil, []string{m, low}},
		} {
			if before, after := rt.StopOrder(c.id); !slices.Equal(before, c.before) || !slices.Equal(after, c.after) {
				t.Errorf("%s stops before %q after %q, want before %q after %q", c.name, before, after, c.before, c.after)
			}
		}

		// low is restarted: its new container stops before the others.
		rt.Exit(low, 1)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		low2 := id("low")
		if low2 == low {
			t.Fatal("low not restarted")
		}
		if before, after := rt.StopOrder(low2); !slices.Equal(before, []string{m, crit}) || len(after) != 0 {
			t.Errorf("restarted low stops before %q after %q, want before [%s %s]", before, after, m, crit)
		}
	})
}

// A pod's stop priority is the highest of its own and of the pods that
// start after it: a critical pod that starts after a default one stops
// first all the same, and the two orders never make a cycle for systemd.
func TestStopPrioritiesFollowStartOrder(t *testing.T) {
	crit := int32(systemNodeCritical)
	pods := map[string]manifest.Pod{}
	for _, p := range []manifest.Pod{
		testPod("etcd", "ua", v1.RestartPolicyAlways, ctr("c", "busybox")),
		withPriority(startAfter(testPod("api", "ub", v1.RestartPolicyAlways, ctr("c", "busybox")), "etcd"), "", &crit),
		testPod("web", "uc", v1.RestartPolicyAlways, ctr("c", "busybox")),
		withPriority(testPod("cm", "ud", v1.RestartPolicyAlways, ctr("c", "busybox")), "system-cluster-critical", nil),
	} {
		pods["default/"+p.Name] = p
	}
	prio := stopPriorities(pods, testNode)
	want := map[string]int32{"default/etcd-node1": crit, "default/api-node1": crit, "default/web-node1": 0,
		"default/cm-node1": systemClusterCritical}
	for key, p := range want {
		if prio[key] != p {
			t.Errorf("%s stop priority %d, want %d", key, prio[key], p)
		}
	}
	higher, lower := byStopPriority(prio, "default/etcd-node1")
	if len(higher) != 0 || !slices.Equal(lower, []string{"default/cm-node1", "default/web-node1"}) {
		t.Errorf("etcd: higher %q lower %q", higher, lower)
	}
	higher, lower = byStopPriority(prio, "default/web-node1")
	if !slices.Equal(higher, []string{"default/cm-node1", "default/api-node1", "default/etcd-node1"}) || len(lower) != 0 {
		t.Errorf("web: higher %q lower %q", higher, lower)
	}
	if higher, lower := byStopPriority(prio, "default/gone-node1"); higher != nil || lower != nil {
		t.Errorf("a pod not desired is ordered: %q %q", higher, lower)
	}
}

// A critical pod among many of a lower priority orders its containers
// against at most maxStopOrdered of theirs.
func TestStopOrderByPriorityBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		var pods []manifest.Pod
		for i := range maxStopOrdered + 10 {
			name := fmt.Sprintf("web%d", i)
			pods = append(pods, testPod(name, "u"+name, v1.RestartPolicyAlways, ctr("c", "busybox")))
		}
		h.send(pods)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		h.send(append(pods, withPriority(testPod("crit", "uc", v1.RestartPolicyAlways, ctr("c", "busybox")), "system-node-critical", nil)))
		time.Sleep(5 * time.Second)
		synctest.Wait()
		crit := strings.TrimPrefix(h.pod("crit").Status.ContainerStatuses[0].ContainerID, containerIDPrefix)
		if before, after := rt.StopOrder(crit); len(before) != 0 || len(after) != maxStopOrdered {
			t.Errorf("crit ordered before %d and after %d containers, want after %d", len(before), len(after), maxStopOrdered)
		}
	})
}
