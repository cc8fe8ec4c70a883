package daemon

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/source"
)

// fileSourceKey and urlSourceKey say what a source is made from: the same
// key, the same source. Headers and the URL are compared as they are, not
// as config shows them (redacted).
func fileSourceKey(cfg *config.Config) string { return cfg.StaticPodPath }

func urlSourceKey(cfg *config.Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q %q %s", cfg.StaticPodURL, cfg.StaticPodURLCA, cfg.HTTPCheckFrequency)
	for _, k := range slices.Sorted(maps.Keys(cfg.StaticPodURLHeader)) {
		fmt.Fprintf(&b, " %q=%q", k, cfg.StaticPodURLHeader[k])
	}
	return b.String()
}

// urlSaveFile keeps the URL source's last good set across restarts.
func urlSaveFile(cfg *config.Config) string {
	return filepath.Join(cfg.RootDir, "manifest-url", "last-good")
}

// newFileSource is the file source of cfg; once: it reads the manifests once
// (run --once).
func (d *System) newFileSource(cfg *config.Config, once bool) *source.Running {
	file := source.NewFile(cfg.StaticPodPath, cfg.NodeName, cfg.FileCheckFrequency, d.seen.Seen, d.logger.With("source", "file"))
	file.Store = d.seen // the last good pod of each manifest outlives a restart
	run := file.Run
	if once {
		run = file.Once
	}
	return &source.Running{Key: fileSourceKey(cfg), Run: run, Relist: file.Relist, File: file}
}

// newURLSource is the URL source of cfg; once: it reads the URL once.
func (d *System) newURLSource(cfg *config.Config, once bool) *source.Running {
	url := source.NewURL(source.URLConfig{
		URL:      cfg.StaticPodURL,
		Header:   cfg.StaticPodURLHeader,
		NodeName: cfg.NodeName,
		Period:   cfg.HTTPCheckFrequency,
		CAFile:   cfg.StaticPodURLCA,
		SaveFile: urlSaveFile(cfg),
		Seen:     d.seen.Seen,
		OnChange: func(source.URLStatus) { d.status.Refresh() },
		Requests: &d.aux.URLRequests,
	}, d.logger.With("source", "url"))
	run := url.Run
	if once {
		run = url.Once
	}
	return &source.Running{Key: urlSourceKey(cfg), Run: run, Relist: url.Relist, URL: url}
}

// forgetURL removes the set saved for a URL no longer configured, so that it
// never comes back with it later; failing to remove it stops nothing.
func (d *System) forgetURL(cfg *config.Config) {
	if err := os.RemoveAll(filepath.Dir(urlSaveFile(cfg))); err != nil {
		d.logger.Warn("cannot remove the saved set of a former manifest URL", "err", err)
	}
}

// applySources makes the running sources those of cfg (a reload): a source
// whose path, URL, headers, CA or URL period changed is replaced, one no
// longer configured is stopped and its pods with it, a new one is started.
// It reports which sources changed.
func (d *System) applySources(cfg *config.Config) (changed []string) {
	switch {
	case cfg.StaticPodPath == "":
		d.sources.Set(manifest.SourceFile, nil)
	case fileSourceKey(cfg) == fileSourceKey(d.cfg):
		if src := d.sources.Get(manifest.SourceFile); src != nil {
			src.File.SetPeriod(cfg.FileCheckFrequency)
		}
	default:
		d.sources.Set(manifest.SourceFile, d.newFileSource(cfg, false))
	}
	if fileSourceKey(cfg) != fileSourceKey(d.cfg) {
		changed = append(changed, manifest.SourceFile)
	}
	if urlSourceKey(cfg) == urlSourceKey(d.cfg) {
		return changed
	}
	changed = append(changed, manifest.SourceHTTP)
	if cfg.StaticPodURL == "" {
		d.sources.Set(manifest.SourceHTTP, nil)
		d.aux.URL.Store(nil)
		d.forgetURL(cfg)
	} else {
		src := d.sources.Set(manifest.SourceHTTP, d.newURLSource(cfg, false))
		d.aux.URL.Store(src.URL)
	}
	d.status.Refresh()
	return changed
}
