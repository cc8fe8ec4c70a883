package agent

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// slowStats is a Runtime whose Stats blocks until released, counting calls.
type slowStats struct {
	Runtime
	calls   atomic.Int32
	entered chan struct{}
	release chan struct{}
}

func (s *slowStats) Stats(ctx context.Context) (*podspec.Summary, error) {
	if s.calls.Add(1) == 1 {
		close(s.entered)
	}
	<-s.release
	return &podspec.Summary{Pods: []podspec.PodStats{{UID: "u1"}}}, nil
}

// The read-only port serves /stats/summary and /metrics/cadvisor without
// authentication, and each reads every pod's and container's cgroups and
// enters every pod's network namespace: requests that come together share
// one measurement, so that a client opening the port's every connection
// gets no more work done than one; one that gives up does not end the
// others' measurement.
func TestStatsSummaryShared(t *testing.T) {
	rt := &slowStats{entered: make(chan struct{}), release: make(chan struct{})}
	a := &Agent{rt: rt}
	const n = 50
	var wg sync.WaitGroup
	results := make(chan *podspec.Summary, n)
	first, cancelFirst := context.WithCancel(context.Background())
	gaveUp := make(chan struct{})
	go func() {
		defer close(gaveUp)
		if _, err := a.StatsSummary(first); err == nil {
			t.Error("a request given up on got a summary")
		}
	}()
	<-rt.entered
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sum, err := a.StatsSummary(context.Background())
			if err != nil {
				t.Error(err)
			}
			results <- sum
		}()
	}
	cancelFirst()
	<-gaveUp
	// Until every request waits on the measurement under way, or a second
	// measurement began.
	for a.sharedStats.joined() < n+1 && rt.calls.Load() == 1 {
		runtime.Gosched()
	}
	close(rt.release)
	wg.Wait()
	close(results)
	for sum := range results {
		if sum == nil || len(sum.Pods) != 1 {
			t.Fatalf("summary %+v, want the measurement's", sum)
		}
	}
	if got := rt.calls.Load(); got != 1 {
		t.Errorf("%d concurrent requests measured %d times, want once", n+1, got)
	}
	// A request after it measures afresh.
	if _, err := a.StatsSummary(context.Background()); err != nil || rt.calls.Load() != 2 {
		t.Errorf("a later request: err %v, %d measurements, want 2", err, rt.calls.Load())
	}
}
