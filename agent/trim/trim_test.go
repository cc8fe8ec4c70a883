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

// At rest the collector's GOGC is off, with a memory limit in its place,
// and the GOGC and the limit it had come back as the daemon wakes; an
// operator's GOGC is never changed, and with an operator's GOMEMLIMIT the
// daemon rests at GOGC=restGCPercent.
func TestRestGC(t *testing.T) {
	t.Setenv("GOGC", "")
	os.Unsetenv("GOGC")
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")
	old := debug.SetGCPercent(100)
	defer debug.SetGCPercent(old)
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	var g RestGC
	runtime.GC()
	g.Rest()
	g.Rest() // twice: the GOGC to put back is still 100
	if got := debug.SetGCPercent(-1); got != -1 {
		t.Errorf("resting GOGC %d, want off", got)
	}
	if got := debug.SetMemoryLimit(-1); got == math.MaxInt64 {
		t.Errorf("resting with no memory limit, want one")
	}
	g.Wake()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC %d after wake, want 100 back", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("memory limit %d after wake, want none back", got)
	}
	g.Wake() // awake already: nothing changes
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC %d after a second wake, want 100", got)
	}

	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(1 << 30)
	g.Rest()
	if got := debug.SetGCPercent(restGCPercent); got != restGCPercent {
		t.Errorf("GOMEMLIMIT in the environment, resting GOGC %d, want %d", got, restGCPercent)
	}
	if got := debug.SetMemoryLimit(-1); got != 1<<30 {
		t.Errorf("GOMEMLIMIT=1GiB in the environment, resting with a limit of %d, want it kept", got)
	}
	g.Wake()
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GOGC %d after wake, want 100 back", got)
	}
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")
	debug.SetMemoryLimit(math.MaxInt64)

	t.Setenv("GOGC", "400")
	debug.SetGCPercent(400)
	g.Rest()
	if got := debug.SetGCPercent(400); got != 400 {
		t.Errorf("GOGC=400 in the environment, resting at %d, want 400 kept", got)
	}
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 {
		t.Errorf("GOGC=400 in the environment, resting with a limit of %d, want none", got)
	}
	g.Wake()
	if got := debug.SetGCPercent(400); got != 400 {
		t.Errorf("GOGC=400 in the environment, %d after wake, want 400", got)
	}
}

// A daemon at rest whose live heap grows (a client that holds more and
// more, slowly or at once) is collected as at GOGC=50: its limit follows the
// live heap after each cycle, so that the heap stays within about 1.5 times
// what is live, and the collector neither stops nor runs without end
// against a limit the live heap has outgrown.
func TestRestGCFollowsTheLiveHeap(t *testing.T) {
	for _, tc := range []struct {
		name    string
		every   int  // chunks of garbage for each chunk kept
		blocked bool // another finalizer of the process never returns
	}{
		{"slowly", 8, false},
		{"at once", 0, false},
		// A finalizer runs on the one goroutine that runs them all: one
		// that blocks (the close of a file on a mount that hangs) must not
		// keep the limit where the rest began.
		{"beside a blocked finalizer", 8, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOGC", "")
			os.Unsetenv("GOGC")
			t.Setenv("GOMEMLIMIT", "")
			os.Unsetenv("GOMEMLIMIT")
			defer debug.SetGCPercent(debug.SetGCPercent(100))
			defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
			if tc.blocked {
				blockFinalizers(t)
			}
			var g RestGC
			runtime.GC()
			g.Rest()
			defer g.Wake()
			start := debug.SetMemoryLimit(-1)

			const chunk, live = 64 << 10, 64 << 20
			var kept [][]byte
			var garbage []byte
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			before := ms.NumGC
			var peak uint64 // the heap's spans in use
			for i := range live / chunk * 8 {
				garbage = make([]byte, chunk) // 512 MiB of garbage in all
				garbage[0] = 1
				if len(kept) < live/chunk && (tc.every == 0 || i%tc.every == 0) {
					kept = append(kept, make([]byte, chunk))
				}
				if i%64 == 0 {
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapInuse)
				}
			}
			runtime.ReadMemStats(&ms)
			n := ms.NumGC - before
			limit := debug.SetMemoryLimit(-1)
			runtime.KeepAlive(kept)
			t.Logf("%d cycles; heap in use up to %d MiB with %d MiB kept; limit %d MiB at the start, %d MiB at the end", n, peak>>20, live>>20, start>>20, limit>>20)
			if n < 10 {
				t.Errorf("%d cycles while 512 MiB of garbage was made, want the collector to run", n)
			}
			// GOGC=50 collects each time the heap has grown by half of
			// what is live: some 60 cycles here (53 to 69 measured on a
			// quiet machine). The rest's limit follows it one cleanup
			// after each cycle, which the runtime runs only once the
			// cycle's sweep is done: with the cores held by other work
			// the background sweeper is late, and this loop, which only
			// allocates, made up to 346 cycles at the limits of earlier
			// ones. The bound lets that pass, and with it a limit that
			// followed at a far smaller margin than GOGC=50's (about
			// GOGC=5); a limit that does not follow at all fails the
			// check of the final limit below (4220 cycles in one run of
			// a limit that never moved, 162 to 393 in others).
			if n > 1000 {
				t.Errorf("%d cycles while 512 MiB of garbage was made, want about 60: the limit did not follow the live heap", n)
			}
			// About 1.5 times (up to 201 MiB measured with the cores
			// held by other work); no limit at all would let the garbage
			// grow the heap towards its 512 MiB.
			if peak > live*4 {
				t.Errorf("heap in use up to %d MiB with %d MiB live, want about 1.5 times", peak>>20, live>>20)
			}
			if limit < live || limit > live*5/2 {
				t.Errorf("limit %d MiB with %d MiB live, want about 1.5 times", limit>>20, live>>20)
			}
		})
	}
}

// blockFinalizers blocks the goroutine that runs finalizers until t ends.
func blockFinalizers(t *testing.T) {
	type blocker struct{ _ *byte }
	release, blocked := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(release) })
	runtime.SetFinalizer(&blocker{}, func(*blocker) {
		close(blocked)
		<-release
	})
	for {
		runtime.GC()
		select {
		case <-blocked:
			return
		default:
			runtime.Gosched()
		}
	}
}
