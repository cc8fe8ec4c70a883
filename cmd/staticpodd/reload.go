package main

import (
	"sort"
	"strings"
	"sync"

	"github.com/staticpodd/staticpodd/agent/config"
)

// liveFields are the configuration fields a reload applies to the running
// daemon; a change to any other field is reported as needing a restart.
var liveFields = map[string]func(d *daemon, cfg *config.Config){
	"fileCheckFrequency": func(d *daemon, cfg *config.Config) {
		if d.file != nil {
			d.file.SetPeriod(cfg.FileCheckFrequency)
		}
		d.cfg.FileCheckFrequency = cfg.FileCheckFrequency
	},
}

// reloadConfig reads the configuration again with the flags of the start,
// applies what can change live and reports the rest. A configuration that
// no longer loads changes nothing.
func (d *daemon) reloadConfig() {
	if d.flags == nil { // run --once: nothing to reload
		return
	}
	cfg, _, err := config.Load(d.flags.ConfigFile, *d.flags)
	if err != nil {
		d.logger.Error("reload: the configuration does not load; the running one stays", "err", err)
		d.aux.setReload("configuration not reloaded: " + err.Error())
		return
	}
	changed := changedFields(d.cfg, cfg)
	var restart []string
	for _, key := range changed {
		if apply, ok := liveFields[key]; ok {
			apply(d, cfg)
			d.logger.Info("reload: configuration change applied", "field", key)
			continue
		}
		restart = append(restart, key)
		d.logger.Warn("reload: configuration change needs a restart", "field", key)
	}
	if len(restart) > 0 {
		d.aux.setReload("restart to apply " + strings.Join(restart, ", "))
	} else {
		d.aux.setReload("")
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

// reloadNote is what the last reload left to say in STATUS=: a change that
// needs a restart, or a configuration that did not load.
type reloadNote struct {
	mu   sync.Mutex // guards note
	note string
}

func (r *reloadNote) setReload(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note = s
}

func (r *reloadNote) reloadNote() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.note
}
