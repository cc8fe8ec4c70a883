package agent

import (
	"context"
	"sync"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// sharedStats has the StatsSummary calls that come while one measures wait
// for that measurement rather than make their own. The read-only port
// serves /stats/summary and /metrics/cadvisor without authentication, and a
// measurement reads every pod's and container's cgroup files and enters
// every pod's network namespace: without sharing, a client holding all the
// port's connections had as many measurements run at once, the node's CPUs
// spent on them. The kubelet serves cAdvisor's cached figures instead.
type sharedStats struct {
	mu   sync.Mutex
	call *statsCall // the measurement under way, if any
}

type statsCall struct {
	done   chan struct{}
	sum    *podspec.Summary
	err    error
	joined int // the calls that wait for it, for tests; guarded by sharedStats.mu
}

// get returns a measurement by measure begun no earlier than the call
// before, waiting at most as long as ctx lasts. The measurement outlives a
// caller that gives up, for the others that wait on it.
func (s *sharedStats) get(ctx context.Context, measure func(context.Context) (*podspec.Summary, error)) (*podspec.Summary, error) {
	s.mu.Lock()
	c := s.call
	if c == nil {
		c = &statsCall{done: make(chan struct{})}
		s.call = c
		go func() {
			sum, err := measure(context.WithoutCancel(ctx))
			s.mu.Lock()
			c.sum, c.err = sum, err
			s.call = nil
			s.mu.Unlock()
			close(c.done)
		}()
	}
	c.joined++
	s.mu.Unlock()
	select {
	case <-c.done:
		return c.sum, c.err
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// joined is how many calls wait, or waited, for the measurement under way.
func (s *sharedStats) joined() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.call == nil {
		return 0
	}
	return s.call.joined
}
