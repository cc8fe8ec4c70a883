package agent

import (
	"sync"

	v1 "k8s.io/api/core/v1"
)

// PodUpdate is the new state of one pod, by full name namespace/name.
type PodUpdate struct {
	Name string // namespace/name
	// Pod is the desired pod with its live status; nil when no source
	// wants a pod of that name any more.
	Pod *v1.Pod
}

// PodWatch hears which pods changed: the agent marks a pod's name each time
// its status changes, and Next takes a snapshot of just those pods. Changes
// between two calls of Next coalesce; nothing is copied until the subscriber
// asks, and the agent never waits for a subscriber.
type PodWatch struct {
	a  *Agent
	ch chan struct{} // one slot: something is marked

	mu    sync.Mutex      // guards dirty
	dirty map[string]bool // full names changed since the last Next
}

// Watch subscribes to pod changes. Every pod known now is marked, so the
// first Next is the whole set. Close it when done.
func (a *Agent) Watch() *PodWatch {
	pw := &PodWatch{a: a, ch: make(chan struct{}, 1), dirty: map[string]bool{}}
	a.mu.Lock()
	defer a.mu.Unlock()
	for key := range a.workers {
		if !isOrphanKey(key) {
			pw.dirty[key] = true
		}
	}
	pw.ch <- struct{}{}
	if a.watches == nil {
		a.watches = map[*PodWatch]bool{}
	}
	a.watches[pw] = true
	return pw
}

// C receives when pods changed since the last Next.
func (pw *PodWatch) C() <-chan struct{} { return pw.ch }

// Next returns the pods changed since the last call, each with its current
// state; a pod changed several times appears once.
func (pw *PodWatch) Next() []PodUpdate {
	pw.mu.Lock()
	names := pw.dirty
	pw.dirty = map[string]bool{}
	pw.mu.Unlock()
	if len(names) == 0 {
		return nil
	}
	out := make([]PodUpdate, 0, len(names))
	pw.a.mu.Lock()
	defer pw.a.mu.Unlock()
	for name := range names {
		u := PodUpdate{Name: name}
		if w := pw.a.workers[name]; w != nil {
			u.Pod = w.published()
		}
		out = append(out, u)
	}
	return out
}

// Synced reports whether every source has delivered its first snapshot and
// every pod in it has been synced (and published) once: only then does a
// pod missing from Next's answers mean that no source wants it.
func (pw *PodWatch) Synced() bool {
	pw.a.mu.Lock()
	defer pw.a.mu.Unlock()
	return pw.a.notifyReady
}

// Close ends the subscription.
func (pw *PodWatch) Close() {
	pw.a.mu.Lock()
	defer pw.a.mu.Unlock()
	delete(pw.a.watches, pw)
}

func (pw *PodWatch) mark(name string) {
	pw.mu.Lock()
	pw.dirty[name] = true
	pw.mu.Unlock()
	select {
	case pw.ch <- struct{}{}:
	default:
	}
}

// markLocked tells every subscriber that the pod of worker key changed.
func (a *Agent) markLocked(key string) {
	if key == "" || isOrphanKey(key) {
		return
	}
	for pw := range a.watches {
		pw.mark(key)
	}
}
