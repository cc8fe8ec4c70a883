package agent

import (
	"github.com/staticpodd/staticpodd/agent/histogram"
)

// timings are the kubelet's kubelet_pod_start_duration_seconds and
// kubelet_pod_worker_duration_seconds{operation_type}.
type timings struct {
	podStart *histogram.H
	// workers by operation type, all made at once: never written after.
	workers map[string]*histogram.H
}

// The pod worker's operation types, as the kubelet's SyncPodType names
// them: a new generation (create), one the worker has (sync), a pod to
// stop or gone (kill).
const (
	opCreate = "create"
	opSync   = "sync"
	opKill   = "kill"
)

func newTimings() timings {
	t := timings{podStart: histogram.New(histogram.PodStartBuckets), workers: map[string]*histogram.H{}}
	for _, op := range []string{opCreate, opSync, opKill} {
		t.workers[op] = histogram.New(histogram.DefaultBuckets)
	}
	return t
}

func (t timings) worker(op string) *histogram.H { return t.workers[op] }

// syncOperation is what the next sync of w does.
func (w *worker) syncOperation() string {
	w.mu.Lock()
	pod, stop := w.box.desired, w.box.evict
	w.mu.Unlock()
	switch {
	case pod == nil || stop != nil:
		return opKill
	case w.gen == nil || w.gen.uid != string(pod.UID):
		return opCreate
	}
	return opSync
}

// PodStartDurations is kubelet_pod_start_duration_seconds: from when the
// agent first took a pod to when it was first Running.
func (a *Agent) PodStartDurations() histogram.Snapshot { return a.timings.podStart.Snapshot() }

// PodWorkerDurations is kubelet_pod_worker_duration_seconds, by operation
// type: how long each sync of a pod took.
func (a *Agent) PodWorkerDurations() map[string]histogram.Snapshot {
	out := make(map[string]histogram.Snapshot, len(a.timings.workers))
	for op, h := range a.timings.workers {
		out[op] = h.Snapshot()
	}
	return out
}
