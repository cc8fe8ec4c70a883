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
// until the next pod event, when the memory limit below cannot be used (an
// operator's GOMEMLIMIT, a limit already set) or was given up. Go keeps the
// heap's pages up to its goal, twice the live heap at the default 100: with
// 100 pods, 5-6 MiB live held 19-21 MiB of heap and stacks over a long rest,
// and the daemon's RSS crept from 24 MiB after its trim to 31-33 MiB. At rest
// the daemon allocates little (a relist, housekeeping), so collecting at 1.5
// times the live heap costs a short cycle now and then; while pods start,
// the default keeps the collector's cycles, which take a core from the
// starting containers, as few as before (docs/benchmarks.md).
const restGCPercent = 50

// restHeapRoom is how much the heap may grow above what was live after the
// trim before the collector runs, while the daemon rests. At rest the
// collector is not paced by GOGC but by a memory limit: with GOGC off, Go's
// forced cycle every 2 minutes (a mark of the whole live heap, about 9 ms of
// a P with 100 pods) does not run, and a cycle comes only once the daemon
// has allocated restHeapRoom. 1 MiB is about what the forced cycle let the
// heap grow by at rest (the housekeeping and relist made 0.5 MiB of garbage
// a minute with 100 pods), so the heap at rest peaks no higher than with
// GOGC 50 and the forced cycle, and the less the daemon allocates at rest,
// the fewer its cycles. It is never more than GOGC 50 would give.
const restHeapRoom = 1 << 20

// limitHeadroom is what the runtime keeps below a memory limit for its own
// pacing (runtime's memoryLimitMinHeapGoalHeadroom, mgcpacer.go): the heap
// goal under a limit is the limit less the memory that holds no heap object,
// less this.
const limitHeadroom = 1 << 20

// RestGC lowers the collector's work while the daemon rests and puts it back
// as it wakes. At rest the collector is off (GOGC=off) under a memory limit
// that leaves restHeapRoom for the heap to grow above what was live at the
// rest's start; if the live heap grows at rest so that a cycle leaves less
// than half of that room (the collector would run ever more often as the
// heap nears the limit, up to the runtime's cap of half the CPU), it gives
// the limit up for GOGC restGCPercent until the daemon wakes, as before the
// limit. Wake puts back the GOGC the daemon had and removes the limit.
//
// A GOGC or GOMEMLIMIT in the environment is the operator's: with GOGC,
// nothing is changed; with GOMEMLIMIT (or a limit set otherwise), only GOGC
// is lowered to restGCPercent at rest. Safe for concurrent use (the
// collector's check runs on the runtime's cleanup goroutine).
type RestGC struct {
	mu    sync.Mutex
	busy  int // the GOGC to put back
	state restState
	gen   uint64 // of the current rest: a check of an earlier one does nothing
	// checked, if set (tests), is called after each check that follows
	// a collection while the limit is set, with whether it gave it up.
	checked func(gaveUp bool)
}

type restState int

const (
	awake       restState = iota
	restLimit             // GOGC off under a memory limit
	restPercent           // GOGC restGCPercent, no limit
)

func (g *RestGC) Rest() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != awake || os.Getenv("GOGC") != "" {
		return
	}
	g.busy = debug.SetGCPercent(restGCPercent)
	if g.busy <= restGCPercent { // off (negative) or already as low: keep it
		debug.SetGCPercent(g.busy)
		return
	}
	g.state = restPercent
	if os.Getenv("GOMEMLIMIT") != "" || debug.SetMemoryLimit(-1) != math.MaxInt64 {
		return
	}
	limit, ok := restMemoryLimit()
	if !ok {
		return
	}
	debug.SetMemoryLimit(limit)
	debug.SetGCPercent(-1)
	g.state = restLimit
	g.gen++
	g.arm(g.gen)
}

func (g *RestGC) Wake() {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch g.state {
	case restLimit:
		debug.SetGCPercent(g.busy) // before the limit goes: never off with no limit
		debug.SetMemoryLimit(math.MaxInt64)
	case restPercent:
		debug.SetGCPercent(g.busy)
	}
	g.state = awake
	g.gen++
}

// sentinel is allocated for one collection to find unreachable: its cleanup
// runs after each cycle while the daemon rests under the limit. It holds a
// pointer so that it is never batched with other objects by the runtime's
// tiny allocator, whose blocks may outlive it.
type sentinel struct{ _ *sentinel }

func (g *RestGC) arm(gen uint64) {
	runtime.AddCleanup(new(sentinel), g.collected, gen)
}

// collected runs after a collection at rest: it keeps the limit while a
// cycle leaves at least half of restHeapRoom above the live heap, and gives
// it up otherwise.
func (g *RestGC) collected(gen uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.state != restLimit || gen != g.gen {
		return
	}
	goal, live, ok := heapGoalLive()
	gaveUp := !ok || goal < live+restHeapRoom/2
	if gaveUp {
		debug.SetGCPercent(restGCPercent) // before the limit goes
		debug.SetMemoryLimit(math.MaxInt64)
		g.state = restPercent
	} else {
		g.arm(gen)
	}
	if g.checked != nil {
		g.checked(gaveUp)
	}
}

// restMemoryLimit is the memory limit under which the collector, off, runs
// once the heap has grown restHeapRoom above what is live now (or less, to
// what GOGC restGCPercent would let it grow to), from the runtime's own
// figures: the limit less the memory that holds no heap object (stacks, the
// runtime's metadata, spans' unused ends), less the runtime's headroom, is
// the heap's goal (runtime's memoryLimitHeapGoal, mgcpacer.go). Called with
// GOGC at restGCPercent, after a collection (the trim's).
func restMemoryLimit() (int64, bool) {
	s := []metrics.Sample{
		{Name: "/gc/heap/goal:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/total:bytes"},
		{Name: "/memory/classes/heap/released:bytes"},
		{Name: "/memory/classes/heap/free:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
	}
	metrics.Read(s)
	var v [6]uint64
	for i := range s {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0, false
		}
		v[i] = s[i].Value.Uint64()
	}
	goal, live, total, released, free, objects := v[0], v[1], v[2], v[3], v[4], v[5]
	if released+free+objects > total || live == 0 || goal < live {
		return 0, false
	}
	nonHeap := total - released - free - objects
	room := min(uint64(restHeapRoom), goal-live)
	heap := live + room
	// The runtime keeps 3% of the goal or limitHeadroom, whichever is more.
	heap += max(uint64(limitHeadroom), heap/97*3)
	limit := nonHeap + heap
	if limit > math.MaxInt64/2 {
		return 0, false
	}
	return int64(limit), true
}

// heapGoalLive reads the collector's heap goal (under the limit, the
// limit's) and the heap the last cycle found live.
func heapGoalLive() (goal, live uint64, ok bool) {
	s := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0, 0, false
	}
	return s[0].Value.Uint64(), s[1].Value.Uint64(), true
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
