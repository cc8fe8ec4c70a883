// Package histogram counts observations in buckets, as a Prometheus
// histogram does, for the agent's timings (pod start, pod worker syncs)
// without tying the agent to a metrics library: agent/server exports them.
package histogram

import (
	"slices"
	"sync"
)

// The kubelet's buckets (pkg/kubelet/metrics): pod start duration, and
// Prometheus' default ones for the pod worker's syncs.
var (
	PodStartBuckets = []float64{0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600, 900, 1200, 1800, 2700, 3600}
	DefaultBuckets  = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
)

// H is a histogram; the zero value is not usable, make one with New.
type H struct {
	bounds []float64
	mu     sync.Mutex // guards the fields below
	counts []uint64   // per bucket, not cumulative; the last is +Inf
	sum    float64
	n      uint64
}

// New returns a histogram with the upper bounds given, ascending.
func New(bounds []float64) *H {
	return &H{bounds: bounds, counts: make([]uint64, len(bounds)+1)}
}

// Observe adds v.
func (h *H) Observe(v float64) {
	i, _ := slices.BinarySearch(h.bounds, v) // the first bound >= v
	h.mu.Lock()
	defer h.mu.Unlock()
	h.counts[i]++
	h.sum += v
	h.n++
}

// Snapshot is a histogram at one time: Buckets maps each upper bound to
// the number of observations at most it (cumulative), as Prometheus wants.
type Snapshot struct {
	Count   uint64
	Sum     float64
	Buckets map[float64]uint64
}

// Snapshot returns what h holds now.
func (h *H) Snapshot() Snapshot {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := Snapshot{Count: h.n, Sum: h.sum, Buckets: make(map[float64]uint64, len(h.bounds))}
	var cum uint64
	for i, b := range h.bounds {
		cum += h.counts[i]
		s.Buckets[b] = cum
	}
	return s
}
