package agent

import "sync"

// listing is a started daemon's first listing of its pods. Until every pod
// that the first full reconcile gave a worker has been published once, Pods
// lists only some of them, or none: a command line asking then would be
// told of no pod that runs. Listed tells it when to ask.
type listing struct {
	mu   sync.Mutex
	seen map[string]bool // keys published before the first full reconcile
	wait map[string]bool // after it, the keys not published yet; nil before
	done chan struct{}
}

func newListing() *listing {
	return &listing{seen: map[string]bool{}, done: make(chan struct{})}
}

// published records that the worker of key published its pods.
func (l *listing) published(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.seen == nil && l.wait == nil: // done
	case l.wait == nil:
		l.seen[key] = true
	default:
		delete(l.wait, key)
		l.closeIfDoneLocked()
	}
}

// reconciled says which workers the first full reconcile has: the listing
// is done once each of them has published.
func (l *listing) reconciled(keys []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.wait = map[string]bool{}
	for _, k := range keys {
		if !l.seen[k] {
			l.wait[k] = true
		}
	}
	l.seen = nil
	l.closeIfDoneLocked()
}

func (l *listing) closeIfDoneLocked() {
	if len(l.wait) == 0 {
		close(l.done)
		l.wait = nil
	}
}

// Listed is closed once the agent lists every pod it found or was given at
// its start: each has been published by its worker.
func (a *Agent) Listed() <-chan struct{} { return a.listing.done }
