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
	file.Credentials = cfg.CredentialsDirectory
	run := file.Run
	if once {
		run = file.Once
	}
	return &source.Running{Key: fileSourceKey(cfg), Run: run, Relist: file.Relist, File: file}
}

// newURLSource is the URL source of cfg; once: it reads the URL once.
func (d *System) newURLSource(cfg *config.Config, once bool) *source.Running {
	url := source.NewURL(source.URLConfig{
		URL:         cfg.StaticPodURL,
		Header:      cfg.StaticPodURLHeader,
		NodeName:    cfg.NodeName,
		Period:      cfg.HTTPCheckFrequency,
		CAFile:      cfg.StaticPodURLCA,
		SaveFile:    urlSaveFile(cfg),
		Credentials: cfg.CredentialsDirectory,
		Seen:        d.seen.Seen,
		OnChange:    func(source.URLStatus) { d.status.Refresh() },
		Requests:    &d.aux.URLRequests,
		Bundle:      d.urlBundle(cfg, once),
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

// liveSources makes the running sources those of a reload's configuration:
// a source whose path, URL, headers, CA or URL period changed is replaced,
// one no longer configured is stopped and its pods with it, a new one is
// started; fileCheckFrequency alone only changes the file source's period.
// Header values are shown redacted, so a changed token shows no change in
// config.Changed: what the sources are made of is compared instead (their
// keys). The Mux runs the sources as a component of its own (startAll).
type liveSources struct {
	reconcileOnly
	d   *System
	cfg *config.Config // the configuration the running sources are made of
}

func (*liveSources) Reloads() config.Reload { return config.ReloadSources }

func (s *liveSources) Reconcile(cfg *config.Config) {
	d, old := s.d, s.cfg
	s.cfg = cfg
	var changed []string
	switch {
	case cfg.StaticPodPath == "":
		d.sources.Set(manifest.SourceFile, nil)
	case fileSourceKey(cfg) == fileSourceKey(old):
		if src := d.sources.Get(manifest.SourceFile); src != nil {
			src.File.SetPeriod(cfg.FileCheckFrequency)
		}
	default:
		d.sources.Set(manifest.SourceFile, d.newFileSource(cfg, false))
	}
	if fileSourceKey(cfg) != fileSourceKey(old) {
		changed = append(changed, manifest.SourceFile)
	}
	if urlSourceKey(cfg) != urlSourceKey(old) {
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
	}
	for _, src := range changed {
		d.logger.Info("reload: manifest source changed", "source", src)
	}
}
