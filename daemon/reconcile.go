package daemon

import (
	"context"
	"log/slog"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/component"
	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/mirror"
	"github.com/staticpodd/staticpodd/oci"
)

// reconcilers are the components that take a reload's configuration, one or
// more for each live group of agent/config's table (component.Reconciler),
// in the order a reload applies them: the sources, the agent's eviction
// thresholds and the mirror's evictionHard, the runtime's log rotation, the
// image garbage collector. Run starts them before the signal handler, so
// that every reload reaches them all. Each keeps the configuration it last
// applied (cfg), which its Reconcile compares the new one with: the reload
// calls them one at a time, under cfgMu.
func (d *System) reconcilers() []component.Component {
	cs := []component.Component{
		&liveSources{d: d, cfg: d.cfg},
		&liveEviction{agent: d.agent, cfg: d.cfg},
	}
	if d.mirror != nil {
		cs = append(cs, &liveEvictionHard{mirror: d.mirror, cfg: d.cfg})
	}
	return append(cs, &liveLogRotation{rt: d.runtime, logger: d.logger, cfg: d.cfg}, d.imageGC)
}

// reconcileOnly is embedded by a component that only takes a reload's
// configuration: the part it configures runs as a component of its own, or
// has no goroutine, so it has nothing to start or stop.
type reconcileOnly struct{}

func (reconcileOnly) Start(context.Context) error { return nil }
func (reconcileOnly) Stop()                       {}

// liveEviction gives the agent's eviction manager the thresholds and periods
// of a reload that changed them.
type liveEviction struct {
	reconcileOnly
	agent *agent.Agent
	cfg   *config.Config
}

func (*liveEviction) Reloads() config.Reload { return config.ReloadEviction }

func (e *liveEviction) Reconcile(cfg *config.Config) {
	if !config.ChangedIn(e.cfg, cfg, config.ReloadEviction) {
		return
	}
	e.cfg = cfg
	e.agent.SetEviction(evictionThresholds(cfg))
}

// liveEvictionHard gives the mirror the evictionHard it reports in the
// Node's configuration, when a reload changed the eviction thresholds.
type liveEvictionHard struct {
	reconcileOnly
	mirror *mirror.Mirror
	cfg    *config.Config
}

func (*liveEvictionHard) Reloads() config.Reload { return config.ReloadEviction }

func (e *liveEvictionHard) Reconcile(cfg *config.Config) {
	if !config.ChangedIn(e.cfg, cfg, config.ReloadEviction) {
		return
	}
	e.cfg = cfg
	e.mirror.SetEvictionHard(cfg.EvictionHard)
}

// liveLogRotation gives the runtime the log rotation of a reload that
// changed it, for new containers and running ones. oci.Runtime does not read
// agent/config (oci and agent meet only through agent.Runtime and
// agent/podspec), so the translation is the wiring's.
type liveLogRotation struct {
	reconcileOnly
	rt     *oci.Runtime
	logger *slog.Logger
	cfg    *config.Config
}

func (*liveLogRotation) Reloads() config.Reload { return config.ReloadLogs }

func (l *liveLogRotation) Reconcile(cfg *config.Config) {
	if !config.ChangedIn(l.cfg, cfg, config.ReloadLogs) {
		return
	}
	l.cfg = cfg
	if err := l.rt.SetLogRotation(cfg.ContainerLogMaxSize, int(cfg.ContainerLogMaxFiles)); err != nil {
		// New containers have the new rotation; some running ones may not.
		l.logger.Warn("reload: log rotation not changed for every running container", "err", err)
	}
}
