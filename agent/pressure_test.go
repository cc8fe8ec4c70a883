package agent

import (
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticpodd/staticpodd/agent/eviction"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Memory pressure evicts the BestEffort hog, never the critical pod; a new
// BestEffort pod is refused meanwhile; once pressure has been gone for the
// transition period both start again, and the conditions say so throughout.
func TestEvictionLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		ts, err := eviction.Parse(map[string]string{"memory.available": "100Mi"}, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := start(t, rt, Config{Eviction: EvictionConfig{Config: eviction.Config{Thresholds: ts, PressureTransitionPeriod: time.Minute}}})
		hog := testPod("hog", "u-hog", v1.RestartPolicyAlways, ctr("leak", "busybox"))
		cp := testPod("cp", "u-cp", v1.RestartPolicyAlways, ctr("etcd", "busybox"))
		cp.Spec.PriorityClassName = "system-node-critical"
		cp.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse("100Mi")}
		node := func(wsMi uint64) podspec.NodeStats {
			return podspec.NodeStats{MemoryCapacity: 1 << 30, MemoryWorkingSet: wsMi << 20, PodsMemoryWorkingSet: wsMi << 20}
		}
		rt.SetStats(node(300), nil)
		h.send([]manifest.Pod{hog, cp})
		if got := rt.Running(); len(got) != 2 {
			t.Fatalf("running %q, want both pods", got)
		}

		// The hog grows: 950Mi of 1Gi used, 74Mi available < 100Mi.
		rt.SetStats(node(950), map[string]podspec.Usage{
			"u-hog": {MemoryWorkingSet: 700 << 20}, "u-cp": {MemoryWorkingSet: 900 << 20},
		})
		time.Sleep(DefaultHousekeeping)
		synctest.Wait()
		p := h.pod("hog")
		if p.Status.Phase != v1.PodFailed || p.Status.Reason != "Evicted" ||
			!strings.HasPrefix(p.Status.Message, "The node was low on resource: memory. Threshold quantity: 100Mi, available: 74Mi.") {
			t.Fatalf("hog: phase %s reason %q message %q, want Failed Evicted", p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
		if p := h.pod("cp"); p.Status.Phase != v1.PodRunning {
			t.Errorf("critical pod %s, want Running", p.Status.Phase)
		}
		hogID := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, containerIDPrefix)
		if got := rt.Calls("signal"); len(got) != 1 || !strings.HasPrefix(got[0], "signal "+hogID+" ") {
			t.Errorf("signals %q, want the hog's only", got)
		}
		if cs := h.pod("hog").Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Terminated == nil {
			t.Errorf("hog's container %+v, want its last state, terminated", cs)
		}
		rt.mu.Lock()
		released := !rt.sandboxes["u-hog"] && rt.sandboxes["u-cp"]
		rt.mu.Unlock()
		if !released {
			t.Error("the evicted pod's sandbox is kept, or the critical pod's gone")
		}
		if e := h.event("Evicted"); e.InvolvedObject.Name != "hog-"+testNode {
			t.Errorf("event %+v", e)
		}
		if got := h.a.Evictions(); len(got) != 1 || got["memory.available"] != 1 {
			t.Errorf("evictions %v, want one for memory.available", got)
		}
		conds := h.a.PressureConditions()
		if len(conds) != 3 || conds[0].Type != v1.NodeMemoryPressure || conds[0].Status != v1.ConditionTrue ||
			conds[0].Reason != "KubeletHasInsufficientMemory" || conds[1].Status != v1.ConditionFalse {
			t.Errorf("conditions %+v", conds)
		}
		if s := h.a.Summary(); !strings.HasSuffix(s, "; node has MemoryPressure") {
			t.Errorf("summary %q", s)
		}

		// A new BestEffort pod is refused under memory pressure.
		late := testPod("late", "u-late", v1.RestartPolicyAlways, ctr("c", "busybox"))
		h.send([]manifest.Pod{hog, cp, late})
		if p := h.pod("late"); p.Status.Phase != v1.PodFailed || p.Status.Message != "The node had condition: [MemoryPressure]. " {
			t.Errorf("late: %s %q, want refused", p.Status.Phase, p.Status.Message)
		}
		starts := len(rt.Calls("start"))

		// Pressure goes; the condition holds for the transition period, then
		// the pods come back after another.
		rt.SetStats(node(300), nil)
		time.Sleep(time.Minute)
		synctest.Wait()
		if h.a.Conditions() != nil {
			t.Errorf("conditions %v a minute after the pressure", h.a.Conditions())
		}
		if n := len(rt.Calls("start")); n != starts {
			t.Errorf("%d starts before pressure has been gone for the transition period", n-starts)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		for _, name := range []string{"hog", "late", "cp"} {
			if p := h.pod(name); p.Status.Phase != v1.PodRunning {
				t.Errorf("%s: %s %q after the pressure, want Running", name, p.Status.Phase, p.Status.Message)
			}
		}
		if got := rt.Calls("destroy"); len(got) != 1 {
			t.Errorf("destroys %q, want the evicted container removed", got)
		}
		if s := h.a.Summary(); strings.Contains(s, "Pressure") {
			t.Errorf("summary %q", s)
		}
	})
}

// Without eviction thresholds the node is never under pressure, and says so
// with fresh heartbeats, as the kubelet's status setters do.
func TestPressureConditionsWithoutThresholds(t *testing.T) {
	a := New(Config{NodeName: testNode}, newFakeRuntime(), slog.New(slog.DiscardHandler))
	conds := a.PressureConditions()
	if len(conds) != 3 {
		t.Fatalf("conditions %+v", conds)
	}
	for i, want := range []string{"KubeletHasSufficientMemory", "KubeletHasNoDiskPressure", "KubeletHasSufficientPID"} {
		if c := conds[i]; c.Status != v1.ConditionFalse || c.Reason != want || time.Since(c.LastHeartbeatTime.Time) > time.Minute {
			t.Errorf("condition %d = %+v, want False %s", i, c, want)
		}
	}
}
