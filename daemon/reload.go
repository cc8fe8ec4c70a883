package daemon

import (
	"maps"
	"slices"
	"sort"
	"strings"

	"github.com/staticpodd/staticpodd/agent/config"
)

// A reload applies these groups of fields to the running daemon; a change
// to any other field is reported as needing a restart (docs/configuration.md
// says why for each).
var (
	// sourceFields: the manifest sources, replaced by applySources
	// (fileCheckFrequency alone only changes the file source's period).
	sourceFields = []string{"staticPodPath", "staticPodURL", "staticPodURLHeader", "fileCheckFrequency", "httpCheckFrequency"}
	// evictionFields: the eviction manager's thresholds and periods.
	evictionFields = []string{"evictionHard", "evictionSoft", "evictionSoftGracePeriod", "evictionMinimumReclaim",
		"evictionPressureTransitionPeriod", "evictionMaxPodGracePeriod"}
	// logFields: container log rotation, for running containers too.
	logFields = []string{"containerLogMaxSize", "containerLogMaxFiles"}
)

// reloadConfig reads the configuration again with the flags of the start,
// applies what can change live and reports the rest. A configuration that
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
	changed := changedFields(d.cfg, cfg)
	is := func(group []string) bool {
		return slices.ContainsFunc(changed, func(k string) bool { return slices.Contains(group, k) })
	}
	// Header values are shown redacted, so a changed token shows no change:
	// applySources compares what the sources are made of.
	for _, src := range d.applySources(cfg) {
		d.logger.Info("reload: manifest source changed", "source", src)
	}
	if is(evictionFields) {
		d.agent.SetEviction(evictionThresholds(cfg))
		if d.mirror != nil {
			d.mirror.SetEvictionHard(cfg.EvictionHard)
		}
	}
	if is(logFields) {
		if err := d.runtime.SetLogRotation(cfg.ContainerLogMaxSize, int(cfg.ContainerLogMaxFiles)); err != nil {
			// New containers have the new rotation; some running ones may not.
			d.logger.Warn("reload: log rotation not changed for every running container", "err", err)
		}
	}
	live := map[string]bool{}
	for _, group := range [][]string{sourceFields, evictionFields, logFields, imageGCFields} {
		for _, k := range group {
			live[k] = true
		}
	}
	var restart []string
	for _, key := range changed {
		if live[key] {
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
	next.StaticPodPath, next.StaticPodURL, next.StaticPodURLHeader = cfg.StaticPodPath, cfg.StaticPodURL, cfg.StaticPodURLHeader
	next.FileCheckFrequency, next.HTTPCheckFrequency = cfg.FileCheckFrequency, cfg.HTTPCheckFrequency
	next.EvictionHard, next.EvictionSoft, next.EvictionSoftGracePeriod = cfg.EvictionHard, cfg.EvictionSoft, cfg.EvictionSoftGracePeriod
	next.EvictionMinimumReclaim, next.EvictionPressureTransitionPeriod = cfg.EvictionMinimumReclaim, cfg.EvictionPressureTransitionPeriod
	next.EvictionMaxPodGracePeriod = cfg.EvictionMaxPodGracePeriod
	next.ContainerLogMaxSize, next.ContainerLogMaxFiles = cfg.ContainerLogMaxSize, cfg.ContainerLogMaxFiles
	next.ImageGCHighThresholdPercent, next.ImageGCLowThresholdPercent = cfg.ImageGCHighThresholdPercent, cfg.ImageGCLowThresholdPercent
	next.ImageMinimumGCAge, next.ImageMaximumGCAge = cfg.ImageMinimumGCAge, cfg.ImageMaximumGCAge
	for _, k := range slices.Concat(sourceFields, evictionFields, logFields, imageGCFields) {
		if o, ok := cfg.Origins[k]; ok {
			next.Origins[k] = o
		} else {
			delete(next.Origins, k)
		}
	}
	d.cfg = &next
	if len(restart) > 0 {
		d.aux.SetReload("restart to apply " + strings.Join(restart, ", "))
	} else {
		d.aux.SetReload("")
	}
}

// changedFields lists, sorted, the keys whose shown value differs between
// old and new.
func changedFields(old, new *config.Config) []string {
	was := map[string]string{}
	for _, e := range old.Entries() {
		was[e.Key] = e.Value
	}
	var out []string
	for _, e := range new.Entries() {
		if v, ok := was[e.Key]; !ok || v != e.Value {
			out = append(out, e.Key)
		}
	}
	sort.Strings(out)
	return out
}
