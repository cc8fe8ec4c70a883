package daemon

import (
	"maps"
	"slices"
	"strings"

	"github.com/staticpodd/staticpodd/agent/config"
)

// reloadConfig reads the configuration again with the flags of the start,
// applies what can change live and reports the rest: the table in
// agent/config says which fields a reload applies, in which group
// (config.Reload); a change to any other field is reported as needing a
// restart (docs/configuration.md says why for each). A configuration that
// does not load changes nothing: the running one stays, whole.
func (d *System) reloadConfig() {
	if d.flags == nil { // run --once: nothing to reload
		return
	}
	d.cfgMu.Lock()
	defer d.cfgMu.Unlock()
	cfg, _, err := config.Load(d.flags.ConfigFile, *d.flags)
	if err != nil {
		d.logger.Error("reload: the configuration does not load; the running one stays", "err", err)
		d.aux.SetReload("configuration not reloaded: " + err.Error())
		return
	}
	changed := config.Changed(d.cfg, cfg)
	is := func(group config.Reload) bool {
		return slices.ContainsFunc(changed, func(k string) bool { return config.ReloadOf(k) == group })
	}
	// Header values are shown redacted, so a changed token shows no change:
	// applySources compares what the sources are made of.
	for _, src := range d.applySources(cfg) {
		d.logger.Info("reload: manifest source changed", "source", src)
	}
	if is(config.ReloadEviction) {
		d.agent.SetEviction(evictionThresholds(cfg))
		if d.mirror != nil {
			d.mirror.SetEvictionHard(cfg.EvictionHard)
		}
	}
	if is(config.ReloadLogs) {
		if err := d.runtime.SetLogRotation(cfg.ContainerLogMaxSize, int(cfg.ContainerLogMaxFiles)); err != nil {
			// New containers have the new rotation; some running ones may not.
			d.logger.Warn("reload: log rotation not changed for every running container", "err", err)
		}
	}
	var restart []string
	for _, key := range changed {
		if config.ReloadOf(key) != config.Restart {
			d.logger.Info("reload: configuration change applied", "field", key)
			continue
		}
		restart = append(restart, key)
		d.logger.Warn("reload: configuration change needs a restart", "field", key)
	}
	// What runs now: the new value of every live field, the old one of the
	// others, so that the next reload reports them again until a restart.
	next := *d.cfg
	next.Origins = maps.Clone(d.cfg.Origins)
	config.CopyLive(&next, cfg)
	d.cfg = &next
	if len(restart) > 0 {
		d.aux.SetReload("restart to apply " + strings.Join(restart, ", "))
	} else {
		d.aux.SetReload("")
	}
}
