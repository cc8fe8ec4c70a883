package agent

import (
	"strings"
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// drain returns what the watch has now, by name, failing when nothing was marked.
func drain(t *testing.T, pw *PodWatch) map[string]*v1.Pod {
	t.Helper()
	select {
	case <-pw.C():
	default:
		t.Fatal("watch not signalled")
	}
	out := map[string]*v1.Pod{}
	for _, name := range pw.Next() {
		out[name] = pw.Desired(name).Copy()
	}
	return out
}

func TestWatchNamesOnlyThePodsThatChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		web := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		db := testPod("db", "u2", v1.RestartPolicyAlways, ctr("a", "busybox"))
		h.send([]manifest.Pod{web, db})

		pw := h.a.Watch()
		defer pw.Close()
		got := drain(t, pw)
		if len(got) != 2 || got["default/web-node1"] == nil || got["default/db-node1"] == nil {
			t.Fatalf("first Next = %v, want both pods", got)
		}
		if p := got["default/web-node1"]; p.Status.Phase != v1.PodRunning {
			t.Errorf("web phase = %s, want Running", p.Status.Phase)
		}
		if n := pw.Next(); len(n) != 0 {
			t.Fatalf("second Next without a change = %v, want none", n)
		}

		// The snapshot is the subscriber's own.
		got["default/web-node1"].Status.Phase = v1.PodFailed
		if p := h.pod("web"); p.Status.Phase != v1.PodRunning {
			t.Fatalf("changing a snapshot changed the agent's pod: phase %s", p.Status.Phase)
		}

		// db's container exits: only db is named.
		rt.Exit(strings.TrimPrefix(h.pod("db").Status.ContainerStatuses[0].ContainerID, containerIDPrefix), 1)
		synctest.Wait()
		got = drain(t, pw)
		if len(got) != 1 || got["default/db-node1"] == nil {
			t.Fatalf("after db's exit Next = %v, want db alone", got)
		}

		// web's manifest goes: web is named with no pod once it is gone.
		h.send([]manifest.Pod{db})
		synctest.Wait()
		got = drain(t, pw)
		if p, ok := got["default/web-node1"]; !ok || p != nil {
			t.Fatalf("after web's removal Next = %v, want web with no pod", got)
		}
	})
}
