// Package component gives the daemon's long-lived parts one shape, and runs
// them: each starts in the order it is added and is stopped in the reverse
// order, as k0s's component manager does. A component's Start returns once it
// runs; the long-running work it started lives in goroutines it owns, which
// its Stop ends and joins. Only the wiring (package daemon) knows them all.
//
// Unlike k0s's, a component has no Ready of its own: the daemon's readiness
// is one fact, the agent's first sync (or agent/ready's gate), said once to
// systemd, and how the auxiliary parts do is agent/health's.
package component

import (
	"context"
	"errors"
	"sync"

	"github.com/staticpodd/staticpodd/agent/config"
)

// Component is a part of the daemon with a lifecycle.
type Component interface {
	// Start starts the component under ctx and returns once it runs, or
	// with why it cannot. Work that outlives Start runs in goroutines the
	// component owns.
	Start(ctx context.Context) error
	// Stop ends the component's goroutines and waits for them. It is called
	// once, after Start returned nil, with Start's context already ended.
	Stop()
}

// Reconciler is a component that takes a new configuration live (a reload):
// it owns one live group of agent/config's table and applies that group's
// fields of cfg; the other fields are not its own.
type Reconciler interface {
	// Reloads is the group Reconcile applies: every live group
	// (config.LiveGroups) has a Reconciler.
	Reloads() config.Reload
	Reconcile(cfg *config.Config)
}

// Failer is a component whose work can fail after Start returned: Failed
// gives that failure, if any, and is closed once the work ended. The first
// failure ends every component's context and is what the Manager's Stop
// returns, as an errgroup's Wait does.
type Failer interface {
	Failed() <-chan error
}

// Manager starts components in order, stops them in reverse and forwards a
// new configuration to those that take one.
type Manager struct {
	ctx    context.Context
	cancel context.CancelCauseFunc

	mu      sync.Mutex  // guards the fields below
	started []Component // in the order they started
	stopped bool
	err     error // the first failure

	watch sync.WaitGroup // the goroutines that wait for a Failer's failure
}

// NewManager is a Manager whose components run until ctx ends, Stop is
// called, or one of them fails.
func NewManager(ctx context.Context) *Manager {
	m := &Manager{}
	m.ctx, m.cancel = context.WithCancelCause(ctx)
	return m
}

// Start starts c after every component started before it. When c fails to
// start, the components already started keep running: the caller's Stop
// stops them.
func (m *Manager) Start(c Component) error {
	if err := c.Start(m.ctx); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.started = append(m.started, c)
	if f, ok := c.(Failer); ok {
		m.watch.Add(1)
		go func() {
			defer m.watch.Done()
			if err, ok := <-f.Failed(); ok && err != nil {
				m.fail(err)
			}
		}()
	}
	return nil
}

func (m *Manager) fail(err error) {
	m.mu.Lock()
	if m.err == nil {
		m.err = err
	}
	m.mu.Unlock()
	m.cancel(err)
}

// Wait returns when the components' context ends: the caller's ended, Stop
// was called, or a component failed.
func (m *Manager) Wait() {
	<-m.ctx.Done()
}

// Context is the context the components run under.
func (m *Manager) Context() context.Context { return m.ctx }

// Stop ends the components' context, for all at once, so that none waits
// for another to end (as an errgroup's does), then joins them, last started
// first. It returns the first failure of a component; nil if none failed.
// Calls after the first only return that failure.
func (m *Manager) Stop() error {
	m.cancel(context.Canceled)
	m.mu.Lock()
	started := m.started
	if m.stopped {
		started = nil
	}
	m.stopped = true
	m.mu.Unlock()
	for i := len(started) - 1; i >= 0; i-- {
		started[i].Stop()
	}
	m.watch.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Reconcile gives cfg to every started component that takes a new
// configuration, in start order.
func (m *Manager) Reconcile(cfg *config.Config) {
	m.mu.Lock()
	started := m.started
	m.mu.Unlock()
	for _, c := range started {
		if r, ok := c.(Reconciler); ok {
			r.Reconcile(cfg)
		}
	}
}

// Task is a component that runs one function until its context ends.
type Task struct {
	run    func(ctx context.Context) error
	cancel context.CancelFunc
	done   chan struct{}
	failed chan error
}

// NewTask is a component that runs run in a goroutine of its own; a
// non-nil error run returns is the component's failure (Failed), as a
// function an errgroup runs.
func NewTask(run func(ctx context.Context) error) *Task {
	return &Task{run: run, failed: make(chan error, 1)}
}

func (t *Task) Start(ctx context.Context) error {
	if t.done != nil {
		return errors.New("component: task started twice")
	}
	ctx, t.cancel = context.WithCancel(ctx)
	t.done = make(chan struct{})
	go func() {
		defer close(t.done)
		defer close(t.failed)
		if err := t.run(ctx); err != nil {
			t.failed <- err
		}
	}()
	return nil
}

func (t *Task) Stop() {
	t.cancel()
	<-t.done
}

func (t *Task) Failed() <-chan error { return t.failed }
