package daemon

import (
	"maps"
	"strings"

	"github.com/staticpodd/staticpodd/agent/config"
)

// reloadConfig reads the configuration again with the flags of the start,
// has each component that owns a live group of agent/config's table apply
// it (component.Reconciler, through Manager.Reconcile: the sources, the
// eviction thresholds, the log rotation, the image garbage collector's
// policy) and reports the fields that need a restart (docs/configuration.md
// says why for each). A configuration that does not load changes nothing:
// the running one stays, whole. The image policy file is read again too; one
// that does not load keeps the running policy, and says why in STATUS=.
func (d *System) reloadConfig() {
	if d.flags == nil { // nothing to read the configuration again with
		d.imageGC.collectImagesSoon()
		return
	}
	d.cfgMu.Lock()
	defer d.cfgMu.Unlock()
	cfg, _, err := config.Load(d.flags.ConfigFile, *d.flags)
	if err != nil {
		d.logger.Error("reload: the configuration does not load; the running one stays", "err", err)
		d.aux.SetReload("configuration not reloaded: " + err.Error())
		// Still the pass every reload asks for, with the policy that runs.
		d.imageGC.collectImagesSoon()
		return
	}
	d.components.Reconcile(cfg)
	var restart []string
	for _, key := range config.Changed(d.cfg, cfg) {
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
	var trouble []string
	if len(restart) > 0 {
		trouble = append(trouble, "restart to apply "+strings.Join(restart, ", "))
	}
	// The policy file is read again at every reload, its path being the
	// start's (a flag).
	if why := d.reloadImagePolicy(cfg); why != "" {
		trouble = append(trouble, why)
	}
	d.aux.SetReload(strings.Join(trouble, "; "))
}
