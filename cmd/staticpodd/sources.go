package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/source"
)

// runningSource is one manifest source of the daemon: the file source or
// the URL source.
type runningSource struct {
	// key is what the source was made from; a reload that changes it
	// replaces the source (the file source's period alone is changed in
	// place).
	key    string
	run    func(context.Context, chan<- source.Update) error
	relist func()
	file   *source.File // the file source; nil for the URL's
	url    *source.URL  // the URL source; nil for the file's

	cancel context.CancelFunc // ends run; set by start
	done   chan struct{}      // closed once run returned
}

// sourceSet runs the daemon's manifest sources, and replaces them when a
// reload changes staticPodPath, staticPodURL or how the URL is read. Each
// source sends the whole set of its pods on one channel; a source that is
// replaced is stopped first, so that its last update never follows the
// first of its successor, and a source that is removed leaves an empty set
// behind it: the agent stops the pods it gave, and keeps those of the other
// source untouched.
type sourceSet struct {
	mu      sync.Mutex // guards the fields below
	ctx     context.Context
	out     chan<- source.Update
	errc    chan error                // the first error of a source's run
	running map[string]*runningSource // by manifest.SourceFile, manifest.SourceHTTP
	// emptied are the sources removed before run: run sends their empty
	// sets, which the agent may be waiting for.
	emptied []string
}

func newSourceSet() *sourceSet {
	return &sourceSet{errc: make(chan error, 1), running: map[string]*runningSource{}}
}

// run starts the sources and returns when ctx ends (nil) or one of them
// fails (its error); the sources end with ctx.
func (s *sourceSet) run(ctx context.Context, out chan<- source.Update) error {
	s.mu.Lock()
	s.ctx, s.out = ctx, out
	for _, src := range s.running {
		s.startLocked(src)
	}
	emptied := s.emptied
	s.emptied = nil
	s.mu.Unlock()
	for _, name := range emptied {
		select {
		case out <- source.Update{Source: name}:
		case <-ctx.Done():
			return nil
		}
	}
	select {
	case <-ctx.Done():
		return nil
	case err := <-s.errc:
		return err
	}
}

func (s *sourceSet) startLocked(src *runningSource) {
	ctx, cancel := context.WithCancel(s.ctx)
	src.cancel, src.done = cancel, make(chan struct{})
	go func() {
		defer close(src.done)
		if err := src.run(ctx, s.out); err != nil && ctx.Err() == nil {
			select {
			case s.errc <- err:
			default:
			}
		}
	}()
}

// set makes src the source called name, or removes that source (src nil).
// A source with the same key as the running one does not replace it. It
// returns the source called name now; nil when there is none.
func (s *sourceSet) set(name string, src *runningSource) *runningSource {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.running[name]
	if old != nil && src != nil && old.key == src.key {
		return old
	}
	if old != nil && old.cancel != nil {
		old.cancel()
		<-old.done
	}
	if src == nil {
		delete(s.running, name)
		switch {
		case old == nil:
		case s.ctx == nil:
			s.emptied = append(s.emptied, name)
		default:
			// The agent's set of this source is what it sent last: empty it.
			select {
			case s.out <- source.Update{Source: name}:
			case <-s.ctx.Done():
			}
		}
		return nil
	}
	s.running[name] = src
	s.emptied = slices.DeleteFunc(s.emptied, func(n string) bool { return n == name })
	if s.ctx != nil {
		s.startLocked(src)
	}
	return src
}

// get returns the source called name; nil when there is none.
func (s *sourceSet) get(name string) *runningSource {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.running[name]
}

// relist makes every source read its manifests now.
func (s *sourceSet) relist() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, src := range s.running {
		src.relist()
	}
}

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
func (d *daemon) newFileSource(cfg *config.Config, once bool) *runningSource {
	file := source.NewFile(cfg.StaticPodPath, cfg.NodeName, cfg.FileCheckFrequency, d.seen.Seen, d.logger.With("source", "file"))
	file.Store = d.seen // the last good pod of each manifest outlives a restart
	run := file.Run
	if once {
		run = file.Once
	}
	return &runningSource{key: fileSourceKey(cfg), run: run, relist: file.Relist, file: file}
}

// newURLSource is the URL source of cfg; once: it reads the URL once.
func (d *daemon) newURLSource(cfg *config.Config, once bool) *runningSource {
	url := source.NewURL(source.URLConfig{
		URL:      cfg.StaticPodURL,
		Header:   cfg.StaticPodURLHeader,
		NodeName: cfg.NodeName,
		Period:   cfg.HTTPCheckFrequency,
		CAFile:   cfg.StaticPodURLCA,
		SaveFile: urlSaveFile(cfg),
		Seen:     d.seen.Seen,
		OnChange: func(source.URLStatus) { d.status.refresh() },
		Requests: &d.aux.urlRequests,
	}, d.logger.With("source", "url"))
	run := url.Run
	if once {
		run = url.Once
	}
	return &runningSource{key: urlSourceKey(cfg), run: run, relist: url.Relist, url: url}
}

// forgetURL removes the set saved for a URL no longer configured, so that it
// never comes back with it later; failing to remove it stops nothing.
func (d *daemon) forgetURL(cfg *config.Config) {
	if err := os.RemoveAll(filepath.Dir(urlSaveFile(cfg))); err != nil {
		d.logger.Warn("cannot remove the saved set of a former manifest URL", "err", err)
	}
}

// applySources makes the running sources those of cfg (a reload): a source
// whose path, URL, headers, CA or URL period changed is replaced, one no
// longer configured is stopped and its pods with it, a new one is started.
// It reports which sources changed.
func (d *daemon) applySources(cfg *config.Config) (changed []string) {
	switch {
	case cfg.StaticPodPath == "":
		d.sources.set(manifest.SourceFile, nil)
	case fileSourceKey(cfg) == fileSourceKey(d.cfg):
		if src := d.sources.get(manifest.SourceFile); src != nil {
			src.file.SetPeriod(cfg.FileCheckFrequency)
		}
	default:
		d.sources.set(manifest.SourceFile, d.newFileSource(cfg, false))
	}
	if fileSourceKey(cfg) != fileSourceKey(d.cfg) {
		changed = append(changed, manifest.SourceFile)
	}
	if urlSourceKey(cfg) == urlSourceKey(d.cfg) {
		return changed
	}
	changed = append(changed, manifest.SourceHTTP)
	if cfg.StaticPodURL == "" {
		d.sources.set(manifest.SourceHTTP, nil)
		d.aux.url.Store(nil)
		d.forgetURL(cfg)
	} else {
		src := d.sources.set(manifest.SourceHTTP, d.newURLSource(cfg, false))
		d.aux.url.Store(src.url)
	}
	d.status.refresh()
	return changed
}
