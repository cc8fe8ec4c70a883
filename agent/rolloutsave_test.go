package agent

import (
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/agent/rollout"
)

// The histories are written after the lock that orders their changes: a
// save that reaches the disk after a later one of the same history is
// dropped, so the file always ends as the last change left it.
func TestRolloutSaveOutOfOrderKeepsTheLast(t *testing.T) {
	r := newRollouts(t.TempDir())
	now := time.Now()
	r.mu.Lock()
	h := r.historyLocked("default", "web")
	h.Start(rollout.Generation{UID: "uid-1"}, now)
	first := r.encodeLocked(h)
	h.Start(rollout.Generation{UID: "uid-2"}, now.Add(time.Second))
	second := r.encodeLocked(h)
	r.mu.Unlock()

	if errs := r.writeAll([]*pendingSave{second, first}); len(errs) > 0 {
		t.Fatal(errs)
	}
	got, err := r.store.Load("default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if c := got.Current(); c == nil || c.UID != "uid-2" {
		t.Fatalf("kept %+v, want the second save's current generation uid-2", c)
	}
	if len(r.written) != 0 || r.inFlight.Load() != 0 {
		t.Errorf("with no save in flight, %d histories' save numbers kept (%d in flight)", len(r.written), r.inFlight.Load())
	}
}

// A pod removed and put back while a save of its history is still on its
// way reads its history again: from that save, not from the disk it has
// not reached yet, or the save is lost.
func TestRolloutSaveInFlightSurvivesRemoveAndReturn(t *testing.T) {
	r := newRollouts(t.TempDir())
	now := time.Now()
	r.mu.Lock()
	h := r.historyLocked("default", "web")
	h.Start(rollout.Generation{UID: "uid-1"}, now)
	first := r.encodeLocked(h)
	// substitute, without the pod, then with it again.
	delete(r.byKey, "default/web")
	h = r.historyLocked("default", "web")
	h.Start(rollout.Generation{UID: "uid-2"}, now.Add(time.Second))
	second := r.encodeLocked(h)
	r.mu.Unlock()

	if errs := r.writeAll([]*pendingSave{second, first}); len(errs) > 0 {
		t.Fatal(errs)
	}
	got, err := r.store.Load("default", "web")
	if err != nil {
		t.Fatal(err)
	}
	if got.Find("uid-1") == nil || got.Find("uid-2") == nil {
		t.Fatalf("kept %+v, want generations uid-1 and uid-2", got.Generations)
	}
}
