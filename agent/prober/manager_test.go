package prober

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
)

// memMarks are probe marks in memory.
type memMarks struct {
	mu sync.Mutex
	m  map[string]bool
}

func (m *memMarks) Set(uid, id, mark string, on bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if on {
		m.m[uid+"/"+id+"."+mark] = true
	} else {
		delete(m.m, uid+"/"+id+"."+mark)
	}
	return nil
}

func (m *memMarks) Marked(uid, id, mark string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[uid+"/"+id+"."+mark]
}

func (m *memMarks) list() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for k := range m.m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// The manager writes what the probes say into its results and marks, tells
// the worker, gates readiness on the startup probe, and joins the probes of
// a container it no longer wants, and all of them on Stop.
func TestManagerResultsAndJoins(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		marks := &memMarks{m: map[string]bool{}}
		var counts Counts
		var mu sync.Mutex
		var got []Update
		m := NewManager(ManagerConfig{Marks: marks, Boot: time.Now(), Counts: &counts, Logger: slog.New(slog.DiscardHandler),
			Updated: func(_ *v1.Pod, _ string, u Update) {
				mu.Lock()
				got = append(got, u)
				mu.Unlock()
			}})
		s := newScript(map[string][]int{"startup": {1, 0}, "ready": {0}})
		c := &v1.Container{Name: "web", StartupProbe: execProbe("startup", 10, 1, 3), ReadinessProbe: execProbe("ready", 10, 1, 3)}
		pod := &v1.Pod{}
		pod.Name, pod.Namespace, pod.UID = "p", "ns", "u1"
		spec := func(id string, c *v1.Container) Spec {
			return Spec{Pod: pod, ID: id, Target: &Target{Container: c, Exec: s.exec}}
		}
		m.Sync(t.Context(), map[string]*v1.Container{"c1": c}, spec)
		synctest.Wait()
		if h, ok := m.Results().Get("c1"); !ok || h.Started || h.Ready {
			t.Fatalf("before the startup probe passed: %+v %v, want not started, not ready", h, ok)
		}
		time.Sleep(21 * time.Second) // the startup probe passed at 10s, readiness at its next period
		synctest.Wait()
		if h, _ := m.Results().Get("c1"); !h.Started || !h.Ready || h.Failed != "" {
			t.Fatalf("after the startup probe passed: %+v, want started and ready", h)
		}
		if want := []string{"u1/c1.ready", "u1/c1.started"}; !slices.Equal(marks.list(), want) {
			t.Errorf("marks %v, want %v", marks.list(), want)
		}
		mu.Lock()
		if len(got) != 2 {
			t.Errorf("updates %+v, want startup then readiness success", got)
		}
		mu.Unlock()
		if last := m.Results().Last("c1"); len(last) != 2 || last[0].Kind != Startup || last[1].Kind != Readiness {
			t.Errorf("last %+v, want startup then readiness", last)
		}
		if n := counts.Snapshot(func(string) bool { return true }); n[CountKey{Namespace: "ns", Pod: "p", UID: "u1", Container: "web", Probe: Startup, Result: Failure}] != 1 {
			t.Errorf("counts %v, want one failed startup probe", n)
		}

		// Not wanted: its probes are joined, what they said stays until pruned.
		m.Sync(t.Context(), nil, spec)
		if len(m.running) != 0 {
			t.Fatalf("running %v after Sync with nothing wanted", m.running)
		}
		if _, ok := m.Results().Get("c1"); !ok {
			t.Error("results of c1 dropped before Prune")
		}
		m.Prune(func(string) bool { return false })
		if _, ok := m.Results().Get("c1"); ok || len(marks.list()) != 0 {
			t.Errorf("after Prune: results kept %v, marks %v", ok, marks.list())
		}

		m.Sync(context.Background(), map[string]*v1.Container{"c2": c}, spec)
		m.Stop()
		if len(m.running) != 0 {
			t.Fatalf("running %v after Stop", m.running)
		}
	})
}

// A container adopted from an earlier daemon keeps what its probes said
// there, from the marks; one this daemon started does not.
func TestManagerAdoptsMarks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		marks := &memMarks{m: map[string]bool{"u1/old.started": true, "u1/old.ready": true, "u1/new.started": true, "u1/new.ready": true}}
		boot := time.Now()
		m := NewManager(ManagerConfig{Marks: marks, Boot: boot, Counts: &Counts{}, Logger: slog.New(slog.DiscardHandler), Updated: func(*v1.Pod, string, Update) {}})
		defer m.Stop()
		s := newScript(map[string][]int{"startup": {1}, "ready": {1}})
		c := &v1.Container{Name: "web", StartupProbe: execProbe("startup", 10, 1, 3), ReadinessProbe: execProbe("ready", 10, 1, 3)}
		pod := &v1.Pod{}
		pod.UID = "u1"
		m.Sync(t.Context(), map[string]*v1.Container{"old": c, "new": c}, func(id string, c *v1.Container) Spec {
			at := boot.Add(time.Second)
			if id == "old" {
				at = boot.Add(-time.Hour)
			}
			return Spec{Pod: pod, ID: id, StartedAt: at, Target: &Target{Container: c, Exec: s.exec}}
		})
		if h, _ := m.Results().Get("old"); !h.Started || !h.Ready {
			t.Errorf("adopted: %+v, want started and ready from its marks", h)
		}
		if h, _ := m.Results().Get("new"); h.Started || h.Ready {
			t.Errorf("started by this daemon: %+v, want neither", h)
		}
	})
}
