package agent

import (
	"github.com/staticpodd/staticpodd/agent/status"
)

// PodWatch hears which pods changed, by full name namespace/name: a
// subscription to the status manager (status.Watch) that also tells when the
// agent has every source's pods.
type PodWatch struct {
	*status.Watch
	a *Agent
}

// Watch subscribes to pod changes. Every pod known now is listed by the
// first Next, so that it is the whole set; orphans, which have no name of
// their own, are not. Close it when done.
func (a *Agent) Watch() *PodWatch {
	a.mu.Lock()
	defer a.mu.Unlock()
	var keys []string
	for key := range a.workers {
		if !isOrphanKey(key) {
			keys = append(keys, key)
		}
	}
	// Made under a.mu: a worker made after is heard of by its first change.
	return &PodWatch{Watch: a.statuses.Watch(keys, func(key string) bool { return !isOrphanKey(key) }), a: a}
}

// Synced reports whether every source has delivered its first snapshot and
// every pod in it has been synced (and published) once: only then does a
// pod missing from Next's answers mean that no source wants it.
func (pw *PodWatch) Synced() bool {
	pw.a.mu.Lock()
	defer pw.a.mu.Unlock()
	return pw.a.notifyReady
}
