package stats

import (
	"sync"
	"time"
)

// layerMaxAge is how long a writable layer's measured size is used before it
// is walked again: a container with a million files costs one walk per
// interval, not one per housekeeping (cadvisor walks every minute).
const layerMaxAge = 30 * time.Second

// LayerMeasurer measures the writable layer of a container's root
// filesystem; the image store is one.
type LayerMeasurer interface {
	WritableBytes(key string) (uint64, error)
}

// Layers caches writable layer sizes by container ID, which a container
// with many files makes slow to walk (as cadvisor's du). The zero value is
// ready to use.
type Layers struct {
	mu sync.Mutex // guards m
	m  map[string]layerSize
}

type layerSize struct {
	bytes uint64
	at    time.Time
}

// WritableBytes is the size of container id's writable layer, as ws
// measures it, measured at most layerMaxAge before now. A failed
// measurement gives the last size known.
func (l *Layers) WritableBytes(ws LayerMeasurer, id string, now time.Time) uint64 {
	l.mu.Lock()
	c, ok := l.m[id]
	l.mu.Unlock()
	if ok && now.Sub(c.at) < layerMaxAge {
		return c.bytes
	}
	n, err := ws.WritableBytes(id)
	if err != nil {
		return c.bytes
	}
	l.mu.Lock()
	if l.m == nil {
		l.m = map[string]layerSize{}
	}
	l.m[id] = layerSize{bytes: n, at: now}
	l.mu.Unlock()
	return n
}

// Forget drops the sizes of containers not in live.
func (l *Layers) Forget(live map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for id := range l.m {
		if !live[id] {
			delete(l.m, id)
		}
	}
}
