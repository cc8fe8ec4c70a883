package trim

import (
	"context"
	"log/slog"
	"math"
	"os"
	"runtime"
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

// gcSettings reads GOGC and the memory limit without changing them.
func gcSettings() (percent int, limit int64) {
	percent = debug.SetGCPercent(100)
	debug.SetGCPercent(percent)
	return percent, debug.SetMemoryLimit(-1)
}

// unsetGCEnv clears GOGC and GOMEMLIMIT for the test and puts the runtime's
// settings back after it.
func unsetGCEnv(t *testing.T) {
	for _, k := range []string{"GOGC", "GOMEMLIMIT"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
	percent, limit := gcSettings()
	t.Cleanup(func() {
		debug.SetGCPercent(percent)
		debug.SetMemoryLimit(limit)
	})
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
}

// At rest the collector is off under a memory limit a little above the
// heap, and the GOGC it had comes back, the limit gone, as the daemon wakes.
func TestRestGC(t *testing.T) {
	unsetGCEnv(t)
	runtime.GC()
	var g RestGC
	g.Rest()
	percent, limit := gcSettings()
	if percent >= 0 {
		t.Fatalf("resting GOGC %d, want off", percent)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	if limit == math.MaxInt64 || uint64(limit) < ms.HeapAlloc || uint64(limit) > ms.Sys+restHeapRoom+limitHeadroom {
		t.Fatalf("resting memory limit %d, want above the heap (%d) and at most the runtime's memory (%d) and the room", limit, ms.HeapAlloc, ms.Sys)
	}
	g.Rest() // twice: the GOGC to put back is still 100, the limit the same
	if p, l := gcSettings(); p != percent || l != limit {
		t.Errorf("after a second Rest: GOGC %d, limit %d; want %d, %d", p, l, percent, limit)
	}
	g.Wake()
	if p, l := gcSettings(); p != 100 || l != math.MaxInt64 {
		t.Errorf("after wake: GOGC %d, limit %d; want 100 and no limit", p, l)
	}
	g.Wake() // awake already: nothing changes
	if p, l := gcSettings(); p != 100 || l != math.MaxInt64 {
		t.Errorf("after a second wake: GOGC %d, limit %d; want 100 and no limit", p, l)
	}
	// Rest again after a wake: a new limit, and a collection that leaves
	// the heap where it was keeps it.
	checked := make(chan bool, 1)
	g.checked = func(gaveUp bool) { checked <- gaveUp }
	g.Rest()
	if p, l := gcSettings(); p >= 0 || l == math.MaxInt64 {
		t.Fatalf("resting again: GOGC %d, limit %d; want off under a limit", p, l)
	}
	runtime.GC()
	if <-checked {
		t.Fatal("a collection at rest with the heap as it was gave the limit up")
	}
	if p, l := gcSettings(); p >= 0 || l == math.MaxInt64 {
		t.Fatalf("after a collection at rest: GOGC %d, limit %d; want still off under a limit", p, l)
	}
	g.Wake()
	if p, l := gcSettings(); p != 100 || l != math.MaxInt64 {
		t.Errorf("after wake: GOGC %d, limit %d; want 100 and no limit", p, l)
	}
	// Awake, collections do not check: nothing is re-armed.
	runtime.GC()
	runtime.GC()
	select {
	case <-checked:
		t.Error("a collection after wake was checked")
	default:
	}
}

// If the live heap grows at rest toward the limit, the collector would run
// more and more often: the daemon goes back to GOGC restGCPercent with no
// limit, until it wakes.
func TestRestGCHeapGrows(t *testing.T) {
	unsetGCEnv(t)
	runtime.GC()
	checked := make(chan bool, 1)
	g := RestGC{checked: func(gaveUp bool) { checked <- gaveUp }}
	g.Rest()
	if p, l := gcSettings(); p >= 0 || l == math.MaxInt64 {
		t.Fatalf("resting: GOGC %d, limit %d; want off under a limit", p, l)
	}
	// The heap grows by twice the room, and stays: the collector, at the
	// limit, runs on its own, or runtime.GC does.
	var kept [][]byte
	for range 2 * restHeapRoom / 4096 {
		kept = append(kept, make([]byte, 4096))
	}
	// One check of a cycle that found it live is enough; a few more, in
	// case a cycle began before the heap had grown.
	for i, gaveUp := 0, false; !gaveUp; i++ {
		if i == 10 {
			t.Fatalf("the heap grew by %d bytes at rest, still under the limit after %d collections", 2*restHeapRoom, i)
		}
		runtime.GC()
		gaveUp = <-checked
	}
	if p, l := gcSettings(); p != restGCPercent || l != math.MaxInt64 {
		t.Fatalf("after the heap grew at rest: GOGC %d, limit %d; want %d and no limit", p, l, restGCPercent)
	}
	runtime.KeepAlive(kept)
	runtime.GC() // no more checks once given up
	select {
	case <-checked:
		t.Error("a collection after the limit was given up was checked")
	default:
	}
	g.Wake()
	if p, l := gcSettings(); p != 100 || l != math.MaxInt64 {
		t.Errorf("after wake: GOGC %d, limit %d; want 100 and no limit", p, l)
	}
}

// An operator's GOGC is never changed; with an operator's GOMEMLIMIT (or a
// limit set otherwise), the limit is theirs and only GOGC is lowered at rest.
func TestRestGCEnvironment(t *testing.T) {
	unsetGCEnv(t)
	t.Setenv("GOGC", "400")
	debug.SetGCPercent(400)
	var g RestGC
	g.Rest()
	if p, l := gcSettings(); p != 400 || l != math.MaxInt64 {
		t.Errorf("GOGC=400 in the environment, resting at GOGC %d, limit %d; want 400 and no limit", p, l)
	}
	g.Wake()
	if p, l := gcSettings(); p != 400 || l != math.MaxInt64 {
		t.Errorf("GOGC=400 in the environment, after wake GOGC %d, limit %d; want 400 and no limit", p, l)
	}

	os.Unsetenv("GOGC")
	debug.SetGCPercent(100)
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30)
	g.Rest()
	if p, l := gcSettings(); p != restGCPercent || l != 1<<30 {
		t.Errorf("GOMEMLIMIT=1GiB in the environment, resting at GOGC %d, limit %d; want %d and the operator's limit", p, l, restGCPercent)
	}
	g.Wake()
	if p, l := gcSettings(); p != 100 || l != 1<<30 {
		t.Errorf("GOMEMLIMIT=1GiB in the environment, after wake GOGC %d, limit %d; want 100 and the operator's limit", p, l)
	}

	os.Unsetenv("GOMEMLIMIT")
	debug.SetMemoryLimit(512 << 20) // set by the program, not the environment
	g.Rest()
	if p, l := gcSettings(); p != restGCPercent || l != 512<<20 {
		t.Errorf("a limit set before the rest, resting at GOGC %d, limit %d; want %d and that limit", p, l, restGCPercent)
	}
	g.Wake()
	if p, l := gcSettings(); p != 100 || l != 512<<20 {
		t.Errorf("a limit set before the rest, after wake GOGC %d, limit %d; want 100 and that limit", p, l)
	}
}
