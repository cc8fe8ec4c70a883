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

// newKillClock starts the clock of a kill of a container of pod uid: its
// grace period, or less if the pod was told to stop sooner (cuts) since,
// though at least manifest.MinimumGracePeriod (a sidecar whose turn comes
// after the cut has passed, as the kubelet's killContainer gives it).
func (w *worker) newKillClock(uid string, grace time.Duration) *killClock {
	now := time.Now()
	c := &killClock{uid: uid, deadline: now.Add(grace)}
	w.mu.Lock()
	if cut, ok := w.cuts[uid]; ok {
		if end := later(cut, now.Add(manifest.MinimumGracePeriod)); end.Before(c.deadline) {
			c.deadline = end
		}
	}
	if w.kills == nil {
		w.kills = map[*killClock]struct{}{}
	}
	w.kills[c] = struct{}{}
	w.mu.Unlock()
	return c
}

// forgetCutLocked ends what cutKillsLocked said of pod uid: its teardown
// is done, or the stop that cut it was lifted and the pod runs again;
// w.mu held.
func (w *worker) forgetCutLocked(uid string) {
	delete(w.cuts, uid)
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
// later than req's grace period from now forward to it, those that run and
// those that begin later (cuts: a sync that took its mail before the cut, a
// sidecar's turn, a pod waiting for its turn to stop); w.mu held. A request
// without a grace period of its own (the pod's) cuts nothing.
func (w *worker) cutKillsLocked(uid string, req *stopRequest) {
	if req == nil || req.grace <= 0 {
		return
	}
	grace := max(req.grace, manifest.MinimumGracePeriod)
	end, cut := time.Now().Add(grace), false
	if prev, ok := w.cuts[uid]; !ok || end.Before(prev) {
		if w.cuts == nil {
			w.cuts = map[string]time.Time{}
		}
		w.cuts[uid] = end
	}
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
