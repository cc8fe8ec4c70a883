package agent

import (
	"context"
	"time"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// killClock is when one container's kill sends SIGKILL: its grace period
// from the kill's start, brought forward when the pod is then stopped with
// a shorter one (a hold through the CRI, an eviction), as the kubelet's pod
// worker cancels a kill in flight and kills again with the shorter grace.
// Its fields are guarded by the worker's mu: cutKills runs on the goroutine
// of whoever stops the pod.
type killClock struct {
	uid      string
	deadline time.Time
	// floor is the earliest the current wait may end: a stop signal is
	// given manifest.MinimumGracePeriod after a preStop hook, whatever the
	// deadline.
	floor time.Time
	// timer ends the current wait (nil between waits).
	timer *time.Timer
}

// newKillClock starts the clock of a kill of a container of pod uid.
func (w *worker) newKillClock(uid string, grace time.Duration) *killClock {
	c := &killClock{uid: uid, deadline: time.Now().Add(grace)}
	w.mu.Lock()
	if w.kills == nil {
		w.kills = map[*killClock]struct{}{}
	}
	w.kills[c] = struct{}{}
	w.mu.Unlock()
	return c
}

// endKillClock forgets c once its kill is over.
func (w *worker) endKillClock(c *killClock) {
	w.mu.Lock()
	delete(w.kills, c)
	w.mu.Unlock()
}

// killWait returns a context that ends at c's deadline, or at floor if that
// is later, with context.DeadlineExceeded as its cause, and moves with the
// deadline when cutKillsLocked brings it forward (or ends with ctx); done
// releases it.
func (w *worker) killWait(ctx context.Context, c *killClock, floor time.Time) (context.Context, func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	w.mu.Lock()
	c.floor = floor
	c.timer = time.AfterFunc(time.Until(later(c.deadline, floor)), func() { cancel(context.DeadlineExceeded) })
	w.mu.Unlock()
	return wctx, func() {
		w.mu.Lock()
		if c.timer != nil {
			c.timer.Stop()
			c.timer = nil
		}
		w.mu.Unlock()
		cancel(nil)
	}
}

// left is what is left of c's current wait.
func (w *worker) left(c *killClock) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return time.Until(later(c.deadline, c.floor))
}

// cutKillsLocked brings the kills of pod uid's containers that would end
// later than req's grace period from now forward to it; w.mu held. A
// request without a grace period of its own (the pod's) cuts nothing.
func (w *worker) cutKillsLocked(uid string, req *stopRequest) {
	if req == nil || req.grace <= 0 {
		return
	}
	grace := max(req.grace, manifest.MinimumGracePeriod)
	end, cut := time.Now().Add(grace), false
	for c := range w.kills {
		if c.uid != uid || !end.Before(c.deadline) {
			continue
		}
		c.deadline, cut = end, true
		if c.timer != nil {
			c.timer.Reset(time.Until(later(end, c.floor)))
		}
	}
	if cut {
		w.logger.Info("stopping the pod's containers sooner", "uid", uid, "reason", req.reason, "grace", grace)
	}
}
