package eviction

import (
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestParse(t *testing.T) {
	ts, err := Parse(map[string]string{"memory.available": "200Mi", "nodefs.available": "10%", "imagefs.available": "0%"},
		map[string]string{"memory.available": "500Mi"}, map[string]string{"memory.available": "1m30s"},
		map[string]string{"memory.available": "50Mi"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, th := range ts {
		s := th.String()
		if th.GracePeriod > 0 {
			s += " " + th.GracePeriod.String()
		}
		if th.MinReclaim != nil {
			s += " +" + th.MinReclaim.String()
		}
		got = append(got, s)
	}
	want := "hard memory.available<200Mi +50Mi|hard nodefs.available<10%|soft memory.available<500Mi 1m30s +50Mi|hard allocatableMemory.available<200Mi +50Mi"
	if strings.Join(got, "|") != want {
		t.Errorf("Parse =\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
	for _, tc := range []struct {
		name                 string
		hard, soft, grace, r map[string]string
		want                 string
	}{
		{"unknown signal", map[string]string{"memory.avail": "1Gi"}, nil, nil, nil, "evictionHard: memory.avail: unsupported eviction signal"},
		{"not a quantity", map[string]string{"memory.available": "lots"}, nil, nil, nil, `evictionHard: memory.available: "lots"`},
		{"negative", map[string]string{"memory.available": "-1Gi"}, nil, nil, nil, "must be positive"},
		{"over 100%", map[string]string{"nodefs.available": "150%"}, nil, nil, nil, "between 0% and 100%"},
		{"soft without grace", nil, map[string]string{"memory.available": "1Gi"}, nil, nil, "evictionSoftGracePeriod: memory.available: grace period must be specified"},
		{"bad grace", nil, map[string]string{"memory.available": "1Gi"}, map[string]string{"memory.available": "soon"}, nil, `"soon" is not a positive duration`},
		{"bad reclaim", nil, nil, nil, map[string]string{"pid.available": "-5"}, "evictionMinimumReclaim: pid.available: negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.hard, tc.soft, tc.grace, tc.r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func mustParse(t *testing.T, hard, soft, grace, reclaim map[string]string) []Threshold {
	t.Helper()
	ts, err := Parse(hard, soft, grace, reclaim)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

func mem(availMi int64) Observations {
	return Observations{MemoryAvailable: {Available: availMi << 20, Capacity: 1 << 30}}
}

func TestSynchronize(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ts := mustParse(t, map[string]string{"memory.available": "100Mi"}, map[string]string{"memory.available": "300Mi"},
		map[string]string{"memory.available": "30s"}, map[string]string{"memory.available": "50Mi"})
	m := New(Config{Thresholds: ts, PressureTransitionPeriod: time.Minute}, t0)
	acts := func(p Pressure) string {
		var s []string
		for _, th := range p.Act {
			s = append(s, th.String())
		}
		return strings.Join(s, ",")
	}
	steps := []struct {
		at    time.Duration
		avail int64
		cond  bool
		act   string
		clear bool
	}{
		{0, 500, false, "", false},
		{10 * time.Second, 250, true, "", false},                                                        // soft met, its grace not yet
		{39 * time.Second, 250, true, "", false},                                                        // 29s in
		{40 * time.Second, 250, true, "soft memory.available<300Mi", false},                             // 30s: grace met
		{50 * time.Second, 90, true, "hard memory.available<100Mi,soft memory.available<300Mi", false},  // hard: at once
		{60 * time.Second, 120, true, "hard memory.available<100Mi,soft memory.available<300Mi", false}, // above 100Mi, below 100+50
		{70 * time.Second, 400, true, "", false},                                                        // relieved, condition held
		{119 * time.Second, 400, true, "", false},                                                       // 59s after last met
		{120 * time.Second, 400, false, "", false},                                                      // transition period over
		{179 * time.Second, 400, false, "", false},                                                      // clear for 59s
		{180 * time.Second, 400, false, "", true},                                                       // clear for the period: pods return
	}
	for _, s := range steps {
		now := t0.Add(s.at)
		p := m.Synchronize(mem(s.avail), now)
		if cond := m.Has(v1.NodeMemoryPressure); cond != s.cond || acts(p) != s.act || m.ClearFor(now) != s.clear {
			t.Errorf("at %v with %dMi: pressure %v act %q clear %v, want %v %q %v", s.at, s.avail, cond, acts(p), m.ClearFor(now), s.cond, s.act, s.clear)
		}
	}
	if got := m.Since(v1.NodeMemoryPressure); !got.Equal(t0.Add(120 * time.Second)) {
		t.Errorf("lastTransition %v, want at 120s", got)
	}
}

func pod(name, class string, prio *int32, memReq string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1.PodSpec{PriorityClassName: class, Priority: prio,
		Containers: []v1.Container{{Name: "c"}}}}
	if memReq != "" {
		p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: resource.MustParse(memReq)}
	}
	return p
}

func stats(wsMi int64, pids uint64) *podspec.PodStats {
	u := podspec.Usage{MemoryWorkingSet: uint64(wsMi << 20), Pids: pids}
	return &podspec.PodStats{Usage: u, Containers: []podspec.ContainerStats{{Name: "c", Usage: u}}}
}

func TestRankAndPick(t *testing.T) {
	high := int32(1000)
	cands := []Candidate{
		{Pod: pod("critical", "system-node-critical", nil, ""), Stats: stats(900, 500)},
		{Pod: pod("within-request", "", nil, "500Mi"), Stats: stats(400, 1)},
		{Pod: pod("over-request-high", "", &high, "100Mi"), Stats: stats(300, 2)},
		{Pod: pod("over-request-small", "", nil, "100Mi"), Stats: stats(150, 3)},
		{Pod: pod("over-request-big", "", nil, "100Mi"), Stats: stats(250, 4)},
	}
	names := func(cs []Candidate) string {
		var s []string
		for _, c := range cs {
			s = append(s, c.Pod.Name)
		}
		return strings.Join(s, ",")
	}
	mc := append([]Candidate(nil), cands[1:]...)
	Rank(MemoryAvailable, mc)
	if got, want := names(mc), "over-request-big,over-request-small,over-request-high,within-request"; got != want {
		t.Errorf("memory rank %s, want %s", got, want)
	}
	pc := append([]Candidate(nil), cands[1:]...)
	Rank(PIDAvailable, pc)
	if got, want := names(pc), "over-request-big,over-request-small,within-request,over-request-high"; got != want {
		t.Errorf("pid rank %s, want %s", got, want)
	}

	ts := mustParse(t, map[string]string{"memory.available": "100Mi"}, nil, nil, nil)
	m := New(Config{Thresholds: ts}, time.Now())
	p := m.Synchronize(mem(50), time.Now())
	ev, ok := m.Pick(p.Act[0], p, cands)
	if !ok || ev.Pod.Name != "over-request-big" || ev.Grace != time.Second {
		t.Fatalf("Pick = %+v %v", ev, ok)
	}
	want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: 50Mi. Container c was using 250Mi, request is 100Mi, has larger consumption of memory. "
	if ev.Message != want {
		t.Errorf("message\n%q\nwant\n%q", ev.Message, want)
	}
	if _, ok := m.Pick(p.Act[0], p, cands[:1]); ok {
		t.Error("a critical pod was picked")
	}
}

func TestAdmit(t *testing.T) {
	ts := mustParse(t, map[string]string{"memory.available": "100Mi", "pid.available": "10"}, nil, nil, nil)
	m := New(Config{Thresholds: ts}, time.Now())
	m.Synchronize(mem(50), time.Now())
	if ok, msg := m.Admit(pod("be", "", nil, ""), v1.PodQOSBestEffort); ok || msg != "The node had condition: [MemoryPressure]. " {
		t.Errorf("BestEffort under memory pressure: %v %q", ok, msg)
	}
	if ok, _ := m.Admit(pod("bu", "", nil, "1Mi"), v1.PodQOSBurstable); !ok {
		t.Error("Burstable refused under memory pressure")
	}
	o := mem(50)
	o[PIDAvailable] = Observation{Available: 5, Capacity: 100}
	m.Synchronize(o, time.Now())
	if ok, _ := m.Admit(pod("bu", "", nil, "1Mi"), v1.PodQOSBurstable); ok {
		t.Error("Burstable admitted under PID pressure")
	}
	if ok, _ := m.Admit(pod("cp", "system-cluster-critical", nil, ""), v1.PodQOSBestEffort); !ok {
		t.Error("critical pod refused")
	}
}

// A reload's SetConfig keeps when an unchanged threshold was first met, so
// its grace period runs on; a threshold whose grace period changed starts
// afresh, and one removed no longer acts.
func TestSetConfigKeepsGraceOfUnchangedThresholds(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	soft := func(grace string) []Threshold {
		return mustParse(t, nil, map[string]string{"memory.available": "300Mi"}, map[string]string{"memory.available": grace}, nil)
	}
	m := New(Config{Thresholds: soft("30s"), PressureTransitionPeriod: time.Minute}, t0)
	m.Synchronize(mem(250), t0) // first met
	m.SetConfig(Config{Thresholds: soft("30s"), PressureTransitionPeriod: time.Minute})
	if p := m.Synchronize(mem(250), t0.Add(30*time.Second)); len(p.Act) != 1 {
		t.Errorf("unchanged threshold after SetConfig: act %v at 30s, want its grace period run out", p.Act)
	}
	m.SetConfig(Config{Thresholds: soft("20s"), PressureTransitionPeriod: time.Minute})
	if p := m.Synchronize(mem(250), t0.Add(31*time.Second)); len(p.Act) != 0 {
		t.Errorf("changed threshold acts at once: %v", p.Act)
	}
	if p := m.Synchronize(mem(250), t0.Add(51*time.Second)); len(p.Act) != 1 {
		t.Errorf("changed threshold: act %v 20s after it was set, want it", p.Act)
	}
	m.SetConfig(Config{PressureTransitionPeriod: time.Minute})
	if p := m.Synchronize(mem(250), t0.Add(52*time.Second)); len(p.Act) != 0 || len(m.Thresholds()) != 0 {
		t.Errorf("no thresholds: act %v", p.Act)
	}
}
