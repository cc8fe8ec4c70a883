package prober

import (
	"context"
	"log/slog"
	"time"

	v1 "k8s.io/api/core/v1"
)

// Manager runs the probes of one pod worker's containers, one Run per
// container instance, and writes what they say into its Results (the
// kubelet's prober.Manager). Which containers are probed is the worker's
// decision, made on its goroutine: Start, Sync, Stop and Prune are called
// from that goroutine only. Every probe goroutine is joined by Sync when
// its container is no longer probed, and by Stop; Start joins none.
type Manager struct {
	cfg     ManagerConfig
	results *Results
	running map[string]*probing // by container ID
}

// probing is one container instance's running probes.
type probing struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// ManagerConfig is what a Manager is made of.
type ManagerConfig struct {
	// Marks keep what running containers' probes said for the next daemon.
	Marks Marks
	// Boot is when the daemon started: a container that started before
	// was adopted, and keeps what the last daemon's probes said of it.
	Boot time.Time
	// Counts counts every probe made, for prober_probe_total.
	Counts *Counts
	// Logger is the pod worker's.
	Logger *slog.Logger
	// Updated is called, from a probe's goroutine, with each update the
	// cache took (none for a container it no longer has), after its mark
	// is kept, and the pod and container its Spec named: it may be before
	// any status shows the container. It must not block for long.
	Updated func(pod *v1.Pod, c string, u Update)
	// Errored, when set, is called, from a probe's goroutine, when a probe
	// of container c of pod starts to err (Config.Errored), the pod and
	// the container those its Spec named: it may be before any status
	// shows the container. It must not block for long.
	Errored func(pod *v1.Pod, c string, k Kind, r Result, err error)
}

// NewManager returns a manager that probes nothing yet.
func NewManager(cfg ManagerConfig) *Manager {
	return &Manager{cfg: cfg, results: NewResults(), running: map[string]*probing{}}
}

// Results is the cache the probes write to.
func (m *Manager) Results() *Results { return m.results }

// Spec is one running container instance to probe.
type Spec struct {
	Pod       *v1.Pod
	ID        string    // the instance's runtime ID
	StartedAt time.Time // when it started (initialDelaySeconds counts from it); zero: now
	// Target is how its probes reach it; Target.Container is its spec.
	Target *Target
}

// HasProbes reports whether container c has a probe.
func HasProbes(c *v1.Container) bool {
	return c.StartupProbe != nil || c.LivenessProbe != nil || c.ReadinessProbe != nil
}

// Sync makes the probed containers those of want, by container ID: it stops
// the probes of every other one, and joins them, then starts those of each
// container of want that has none, as spec describes it. The probes never
// kill a container that is stopping: it is not in want.
func (m *Manager) Sync(ctx context.Context, want map[string]*v1.Container, spec func(id string, c *v1.Container) Spec) {
	for id, p := range m.running {
		if want[id] == nil {
			p.cancel()
			<-p.done
			delete(m.running, id)
		}
	}
	m.Start(ctx, want, spec)
}

// Start starts the probes of each container of want that has none, as spec
// describes it, and stops none: what Sync does without waiting for a probe
// to stop.
func (m *Manager) Start(ctx context.Context, want map[string]*v1.Container, spec func(id string, c *v1.Container) Spec) {
	for id, c := range want {
		if m.running[id] == nil {
			m.start(ctx, spec(id, c))
		}
	}
}

// Stop stops every probe and joins them: the pod worker returns.
func (m *Manager) Stop() { m.Sync(context.Background(), nil, nil) }

func (m *Manager) start(ctx context.Context, s Spec) {
	c, pod := s.Target.Container, s.Pod
	uid, id := string(pod.UID), s.ID
	startedAt := s.StartedAt
	if startedAt.IsZero() {
		startedAt = time.Now()
	}
	// A container found running at start keeps what the last daemon's
	// probes said of it, so a daemon restart does not make a Ready pod
	// unready until its probes run again.
	adopted := startedAt.Before(m.cfg.Boot)
	wasStarted := adopted && c.StartupProbe != nil && m.cfg.Marks.Marked(uid, id, MarkStarted)
	wasReady := adopted && c.ReadinessProbe != nil && m.cfg.Marks.Marked(uid, id, MarkReady)
	m.results.add(id, uid, Health{Started: c.StartupProbe == nil || wasStarted, Ready: c.ReadinessProbe == nil || wasReady})

	cfg := Config{
		ContainerID: id,
		StartedAt:   startedAt,
		Target:      s.Target,
		Startup:     c.StartupProbe,
		Liveness:    c.LivenessProbe,
		Readiness:   c.ReadinessProbe,
		// A container found running when the daemon started: spread the
		// first probes of all of them over a period, as the kubelet does
		// after a restart. One this daemon started is probed at once.
		Jitter:  adopted,
		Started: wasStarted,
		Ready:   wasReady,
		Report:  func(u Update) { m.report(pod, c.Name, u) },
		Observe: func(k Kind, r Result) {
			m.cfg.Counts.Add(CountKey{Namespace: pod.Namespace, Pod: pod.Name, UID: uid, Container: c.Name, Probe: k, Result: r})
		},
		Logger: m.cfg.Logger.With("container", c.Name, "id", id),
	}
	if m.cfg.Errored != nil {
		cfg.Errored = func(k Kind, r Result, err error) { m.cfg.Errored(pod, c.Name, k, r, err) }
	}
	pctx, cancel := context.WithCancel(ctx)
	p := &probing{cancel: cancel, done: make(chan struct{})}
	m.running[id] = p
	go func() {
		defer close(p.done)
		Run(pctx, cfg)
	}()
}

// report takes a probe's update of container c of pod, from its goroutine,
// into the cache, keeps its mark for the next daemon, and tells the worker.
func (m *Manager) report(pod *v1.Pod, c string, u Update) {
	podUID, mark, ok := m.results.set(u)
	if !ok {
		return
	}
	if mark != "" {
		if err := m.cfg.Marks.Set(podUID, u.ContainerID, mark, u.Result == Success); err != nil {
			m.cfg.Logger.Warn("cannot keep a probe's result for the next daemon", "id", u.ContainerID, "err", err)
		}
	}
	m.cfg.Updated(pod, c, u)
}

// Prune forgets what the probes said of the containers known reports not
// known, and their marks: the worker no longer has them.
func (m *Manager) Prune(known func(id string) bool) {
	for id, uid := range m.results.prune(known) {
		_ = m.cfg.Marks.Set(uid, id, MarkStarted, false)
		_ = m.cfg.Marks.Set(uid, id, MarkReady, false)
	}
}
