// Package tick gives the daemon's periodic work one clock. A Ticker fires at
// the multiples of its period counted from one instant the whole process
// shares, so that tickers whose periods divide one another (the eviction
// manager's 10 s, the relists' 20 s, the pods' 1 m resync) fire in the same
// wake-up of an idle daemon instead of each in its own: the Go runtime runs
// every timer due when it wakes for the first. Each period is kept; only
// the first tick comes sooner, at the next multiple.
package tick

import (
	"sync"
	"time"
)

// epoch is the instant every Ticker counts its multiples from.
var epoch = time.Now()

// A Ticker delivers a tick on C at each multiple of its period, as a
// time.Ticker does: a tick not received yet is not doubled, and none is
// delivered after Stop or Reset returns that was due before.
type Ticker struct {
	C <-chan time.Time

	c       chan time.Time
	mu      sync.Mutex // guards period, stopped and t's arming
	period  time.Duration
	stopped bool
	t       *time.Timer
}

// New returns a Ticker of period d, which must be positive.
func New(d time.Duration) *Ticker {
	if d <= 0 {
		panic("tick: non-positive period")
	}
	c := make(chan time.Time, 1)
	tk := &Ticker{C: c, c: c, period: d}
	// Under mu: fire, which reads t, may run before New returns.
	tk.mu.Lock()
	tk.t = time.AfterFunc(Until(time.Now(), d), tk.fire)
	tk.mu.Unlock()
	return tk
}

// Until is how long after now the next multiple of d comes (in (0, d]).
func Until(now time.Time, d time.Duration) time.Duration {
	// A clock behind the epoch (synctest's) counts backwards from it.
	r := now.Sub(epoch) % d
	if r < 0 {
		r += d
	}
	return d - r
}

func (tk *Ticker) fire() {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if tk.stopped {
		return
	}
	now := time.Now()
	select {
	case tk.c <- now:
	default:
	}
	tk.t.Reset(Until(now, tk.period))
}

// Stop stops the ticks.
func (tk *Ticker) Stop() {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	tk.stopped = true
	tk.t.Stop()
	tk.drain()
}

// Reset makes the period d (positive) and starts the ticks again if stopped.
func (tk *Ticker) Reset(d time.Duration) {
	if d <= 0 {
		panic("tick: non-positive period")
	}
	tk.mu.Lock()
	defer tk.mu.Unlock()
	tk.stopped, tk.period = false, d
	tk.t.Reset(Until(time.Now(), d))
	tk.drain()
}

func (tk *Ticker) drain() {
	select {
	case <-tk.c:
	default:
	}
}
