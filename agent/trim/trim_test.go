package trim

import (
	"context"
	"log/slog"
	"os"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
)

// The daemon trims once it has been quiet for trimQuiet after its first
// sync, not while events keep coming, and once again after a later burst.
func TestTrimWhenQuiet(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := events.New("node1", 0, slog.New(slog.DiscardHandler))
		synced := make(chan struct{})
		var trims, drops, wakes atomic.Int32
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			WhenQuiet(ctx, rec, synced, func() { trims.Add(1) }, func() { drops.Add(1) }, func() { wakes.Add(1) })
			close(done)
		}()
		event := func() {
			rec.Eventf(events.NodeRef("node1"), v1.EventTypeNormal, "Test", "something happened")
			synctest.Wait()
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if n := trims.Load(); n != 0 {
			t.Fatalf("%d trims before the first sync, want 0", n)
		}
		if n := drops.Load(); n != 0 {
			t.Fatalf("%d drops before the first sync, want 0", n)
		}
		close(synced)
		synctest.Wait()
		if n := drops.Load(); n != 1 {
			t.Fatalf("%d drops once the first sync is done, want 1", n)
		}
		// A burst: an event every second for a minute.
		for range 60 {
			time.Sleep(time.Second)
			event()
		}
		if n := trims.Load(); n != 0 {
			t.Fatalf("%d trims during the burst, want 0", n)
		}
		time.Sleep(trimQuiet + time.Second)
		synctest.Wait()
		if n := trims.Load(); n != 1 {
			t.Fatalf("%d trims after the burst, want 1", n)
		}
		time.Sleep(time.Hour) // quiet: nothing more to give back
		synctest.Wait()
		if n := trims.Load(); n != 1 {
			t.Fatalf("%d trims after an hour of quiet, want still 1", n)
		}
		if n := drops.Load(); n != 1 {
			t.Fatalf("%d drops after an hour of rest, want still 1", n)
		}
		if n := wakes.Load(); n != 0 {
			t.Fatalf("%d wakes before an event after the trim, want 0", n)
		}
		event()
		event()
		if n := wakes.Load(); n != 1 {
			t.Fatalf("%d wakes after two events after the trim, want 1", n)
		}
		time.Sleep(trimQuiet + time.Second)
		synctest.Wait()
		if n := trims.Load(); n != 2 {
			t.Fatalf("%d trims after a second burst, want 2", n)
		}
		if n := wakes.Load(); n != 1 {
			t.Fatalf("%d wakes by the second burst, want 1", n)
		}
		// An event every 15 s for an hour (a failing probe): a trim at most
		// every trimEvery, not one after each.
		for range 240 {
			time.Sleep(15 * time.Second)
			event()
		}
		if n := trims.Load() - 2; n < 1 || n > int32(time.Hour/trimEvery)+1 {
			t.Fatalf("%d trims in an hour of an event every 15 s, want 1 to %d", n, time.Hour/trimEvery+1)
		}
		// Right after a trim, a burst of pods (trimBurst events) is trimmed
		// after as soon as it is over, not trimEvery later.
		time.Sleep(time.Hour)
		synctest.Wait()
		before := trims.Load()
		event()
		time.Sleep(trimQuiet + time.Second)
		synctest.Wait()
		if n := trims.Load() - before; n != 1 {
			t.Fatalf("%d trims after a quiet hour and one event, want 1", n)
		}
		for range trimBurst {
			time.Sleep(100 * time.Millisecond)
			event()
		}
		time.Sleep(trimQuiet + time.Second)
		synctest.Wait()
		if n := trims.Load() - before; n != 2 {
			t.Fatalf("%d trims after a burst of %d events %v after a trim, want 2", n, trimBurst, 2*trimQuiet)
		}
		cancel()
		<-done
	})
}

// At rest the collector targets restGCPercent, and the GOGC it had comes
// back as the daemon wakes; an operator's GOGC is never changed.
func TestRestGC(t *testing.T) {
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	var g RestGC
	g.Rest()
	g.Rest() // twice: the GOGC to put back is still 100
	if got := debug.SetGCPercent(restGCPercent); got != restGCPercent {
		t.Errorf("resting GOGC %d, want %d", got, restGCPercent)
	}
	g.Wake()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC %d after wake, want 100 back", got)
	}
	g.Wake() // awake already: nothing changes
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC %d after a second wake, want 100", got)
	}

	t.Setenv("GOGC", "400")
	debug.SetGCPercent(400)
	g.Rest()
	if got := debug.SetGCPercent(400); got != 400 {
		t.Errorf("GOGC=400 in the environment, resting at %d, want 400 kept", got)
	}
	g.Wake()
	if got := debug.SetGCPercent(400); got != 400 {
		t.Errorf("GOGC=400 in the environment, %d after wake, want 400", got)
	}
}
