// Package trim gives back the memory the daemon's start or a burst of pod
// changes touched, once it has been quiet: the executable's pages and the
// heap, with the collector's target lowered while the daemon rests.
package trim

import (
	"context"
	"os"
	"runtime/debug"
	"time"

	"github.com/staticpodd/staticpodd/agent/events"
)

// trimQuiet is how long the daemon has had no pod event before it gives back
// the memory its start or the last burst of changes touched.
const trimQuiet = 10 * time.Second

// trimEvery is the least time between two trims: events that come now and
// then for ever (a probe failing every 15 s) would otherwise make the daemon
// collect, give back and fault its pages in again after each.
const trimEvery = 5 * time.Minute

// trimBurst is the number of events in a burst (events less than trimQuiet
// apart) after which the daemon trims once quiet, however recent the last
// trim: pods started or stopped by the ten, not one container's restart.
// Without it, the trim of a daemon idle since its start (10 s after the first
// sync, before any manifest came) put off the trim after the pods' start by
// 5 minutes: with 100 pods dropped 12 s after the start, the RSS stayed at
// 38.9 MiB where it falls to 25-28 MiB once trimmed (sampled every second).
const trimBurst = 20

// restGCPercent is the collector's GOGC while the daemon rests, from a trim
// until the next pod event. Go keeps the heap's pages up to its goal, twice
// the live heap at the default 100: with 100 pods, 5-6 MiB live held 19-21
// MiB of heap and stacks over a long rest, and the daemon's RSS crept from
// 24 MiB after its trim to 31-33 MiB. At rest the daemon allocates little (a
// relist, housekeeping), so collecting at 1.5 times the live heap costs a
// short cycle now and then; while pods start, the default keeps the
// collector's cycles, which take a core from the starting containers, as
// few as before (docs/benchmarks.md).
const restGCPercent = 50

// RestGC lowers the collector's target while the daemon rests and puts it
// back as it wakes. A GOGC in the environment is the operator's, and left
// as it is. Not safe for concurrent use: WhenQuiet's goroutine calls it.
type RestGC struct {
	busy    int // the GOGC to put back
	resting bool
}

func (g *RestGC) Rest() {
	if g.resting || os.Getenv("GOGC") != "" {
		return
	}
	g.busy = debug.SetGCPercent(restGCPercent)
	if g.busy <= restGCPercent { // off (negative) or already as low: keep it
		debug.SetGCPercent(g.busy)
		return
	}
	g.resting = true
}

func (g *RestGC) Wake() {
	if g.resting {
		debug.SetGCPercent(g.busy)
		g.resting = false
	}
}

// WhenQuiet calls trim once the daemon's first sync is done and no event
// came for trimQuiet, and again after each later burst of events, until ctx
// ends. Start-up and a burst of pod starts touch most of the binary's code
// (the kernel maps it 64 KiB at a time) and grow the heap, and neither the
// kernel nor Go gives that back to a process that is idle and not short of
// memory: with 10 pods it was half the daemon's RSS (docs/benchmarks.md).
// drop is called once the first sync is done. The first event after a trim
// calls wake.
func WhenQuiet(ctx context.Context, rec *events.Recorder, synced <-chan struct{}, trim, drop, wake func()) {
	select {
	case <-ctx.Done():
		return
	case <-synced:
	}
	// What the daemon's start touched of the executable after its package
	// initializers (the recovery, the checks, the servers, the runtime's
	// copy of the monitor program) is given back at once, not only after a
	// quiet spell: a burst of pods that comes with the start (at boot) would
	// otherwise peak with it on top of what the burst maps.
	drop()
	_, sub := rec.Subscribe()
	defer func() { sub.Close() }()
	quiet := time.NewTimer(trimQuiet)
	defer quiet.Stop()
	armed := true
	burst := 0         // events since the last quiet spell
	var last time.Time // of the last trim
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-sub.C():
			if !ok { // fell behind: the burst goes on
				_, sub = rec.Subscribe()
				burst = trimBurst
			}
			quiet.Reset(trimQuiet)
			if !armed {
				wake()
			}
			armed = true
			burst++
		case <-quiet.C:
			if !armed {
				continue
			}
			if since := time.Since(last); !last.IsZero() && since < trimEvery && burst < trimBurst {
				quiet.Reset(trimEvery - since)
				burst = 0
				continue
			}
			trim()
			last, armed, burst = time.Now(), false, 0
		}
	}
}
