// Package trim gives back the memory the daemon's start or a burst of pod
// changes touched, once it has been quiet: the executable's pages and the
// heap, with the collector's target lowered while the daemon rests.
package trim

import (
	"context"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
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
// as it is.
//
// At rest the target is not a GOGC but a memory limit with GOGC off, put
// where GOGC=restGCPercent would have put the heap's goal and moved there
// again after every cycle: the runtime forces a cycle every two minutes while
// GOGC is on, whether or not anything was allocated, and that cycle, which
// marks the whole live heap and every stack, was most of an idle daemon's CPU
// (docs/benchmarks.md). Under the limit the collector runs when the heap has
// grown by what GOGC=50 allows, and not for the clock. A GOMEMLIMIT in the
// environment is the operator's too: then the daemon rests at GOGC=50.
type RestGC struct {
	mu      sync.Mutex
	busy    int   // the GOGC to put back
	limit   int64 // the memory limit to put back
	resting bool
	byLimit bool   // resting with GOGC off and a limit that follows the heap
	gen     uint64 // of the rest: a cycle's hook of an earlier one does nothing
	samples []metrics.Sample
}

// Rest lowers the target. It is called right after a full collection (the
// trim's), when the heap is swept: what the heap's spans hold beside its
// objects is then only what the live objects leave unused.
func (g *RestGC) Rest() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.resting || os.Getenv("GOGC") != "" {
		return
	}
	g.busy = debug.SetGCPercent(restGCPercent)
	if g.busy <= restGCPercent { // off (negative) or already as low: keep it
		debug.SetGCPercent(g.busy)
		return
	}
	g.resting = true
	g.gen++
	if os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	g.byLimit = true
	g.limit = debug.SetMemoryLimit(g.restLimit(g.read()))
	debug.SetGCPercent(-1)
	g.afterNextCycle(g.gen)
}

func (g *RestGC) Wake() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.resting {
		return
	}
	debug.SetGCPercent(g.busy)
	if g.byLimit {
		debug.SetMemoryLimit(g.limit)
	}
	g.resting, g.byLimit = false, false
}

// afterNextCycle moves the limit after the collector's next cycle, while the
// rest of gen lasts: an object nothing refers to is found so in that cycle,
// and its cleanup runs after it. A cleanup, not a finalizer: finalizers run
// one after another on a single goroutine, and one that blocks (the close of
// a file on a mount that hangs) would keep the limit where it was while the
// live heap outgrows it, and the collector would then run without end.
func (g *RestGC) afterNextCycle(gen uint64) {
	runtime.AddCleanup(&cycleMark{}, g.cycled, gen)
}

func (g *RestGC) cycled(gen uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.resting && g.byLimit && g.gen == gen {
		debug.SetMemoryLimit(g.restLimit(g.read()))
		g.afterNextCycle(gen)
	}
}

// cycleMark is the object afterNextCycle leaves for the collector: not
// pointer-free, so that it is never one of the runtime's tiny allocations,
// which share a block and are found unreachable together, or never.
type cycleMark struct{ _ *byte }

// heapFigures is what restLimit needs of the runtime's memory.
type heapFigures struct {
	other   uint64 // mapped, not released, and not the heap's spans: stacks, metadata
	unused  uint64 // the heap's spans not used by objects
	live    uint64 // marked by the last cycle
	scanned uint64 // the stacks and globals GOGC counts beside the live heap
}

// The runtime's names of what heapFigures holds.
var heapMetrics = []string{
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
	"/gc/heap/live:bytes",
	"/gc/scan/stack:bytes",
	"/gc/scan/globals:bytes",
}

func (g *RestGC) read() heapFigures {
	if g.samples == nil {
		for _, name := range heapMetrics {
			g.samples = append(g.samples, metrics.Sample{Name: name})
		}
	}
	metrics.Read(g.samples)
	v := make([]uint64, len(g.samples))
	for i, s := range g.samples {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	total, released, free, objects, unused := v[0], v[1], v[2], v[3], v[4]
	return heapFigures{
		other:   total - min(total, released+free+objects+unused),
		unused:  unused,
		live:    v[5],
		scanned: v[6] + v[7],
	}
}

// restLimit is the memory limit whose heap goal is GOGC=restGCPercent's
// after the cycle that marked h.live. GOGC's goal is the live heap plus GOGC
// percent of it, the stacks and the globals, at least GOGC percent of 4 MiB.
// The runtime's goal under a limit is the limit less all it has mapped and
// not released that is neither the free heap nor objects (the other memory,
// and the spans' unused part), less 3% and at least 1 MiB of headroom
// (runtime/mgcpacer.go, memoryLimitHeapGoal). It is taken from the live heap
// the cycle marked, not from the objects the spans hold after it: until they
// are swept the spans count their garbage as objects, and a limit taken from
// them would grow by that garbage from one cycle to the next. The spans'
// unused part is counted as it is: a limit without it would fall short of a
// heap whose free slots are of sizes no longer allocated, and the collector
// would run without end. A fragmented heap may so fill its free slots beside
// the half of the live heap that GOGC=50 allows: it rests at more than
// GOGC=50's heap, with fewer cycles.
func (g *RestGC) restLimit(h heapFigures) int64 {
	goal := max(h.live+(h.live+h.scanned)*restGCPercent/100, 4<<20*restGCPercent/100)
	headroom := max(goal*3/97, 1<<20)
	return int64(min(h.other+h.unused+goal+headroom, math.MaxInt64))
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
