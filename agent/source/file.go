package source

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// File delivers the static pods of a directory (one pod per file, not recursive)
// or of a single file, as the kubelet's file source does: a list at start, then on
// every inotify event and every period. Unlike the kubelet, a manifest that turns
// invalid keeps its last good pod (reported as a Problem too), backups and editor
// leftovers are skipped with a warning, and a single file is watched through its
// directory so editors that replace it by rename are followed.
type File struct {
	path     string
	nodeName string
	period   time.Duration
	seen     manifest.SeenFunc
	logger   *slog.Logger
	relist   chan struct{} // Relist asks Run to list now

	// Owned by Run's goroutine.
	files    map[string]*fileState   // by path
	seenAt   map[types.UID]time.Time // config.seen of the pods of the last update
	notes    map[string]string       // one-time messages already logged, by path
	last     string                  // fingerprint of the last update sent
	sent     bool
	missing  bool // the path did not exist at the last list
	watching string
	// recheck is set when a file failed while it may still be being written;
	// Run lists again after settleTime instead of reporting it at once.
	recheck bool
}

// settleTime is how long after its last change a failing file counts as still
// being written (cp, scp and editors that write in place): its failure is only
// reported once it has been left alone that long. Good content is used at once.
const settleTime = 500 * time.Millisecond

// fileState is what one manifest file gave the last time its content changed.
type fileState struct {
	sum  [sha256.Size]byte
	pods []manifest.Pod // the last good parse; kept when the file turns bad
	err  error          // why the current content is unusable, nil when it is fine
}

// NewFile returns a source for path, a directory or one file, on node nodeName,
// relisting every period (fileCheckFrequency). seen gives the first-seen time of a
// pod UID for the kubernetes.io/config.seen annotation (nil: the current time).
func NewFile(path, nodeName string, period time.Duration, seen manifest.SeenFunc, logger *slog.Logger) *File {
	return &File{
		path:     strings.TrimRight(path, string(os.PathSeparator)),
		nodeName: nodeName,
		period:   period,
		seen:     seen,
		logger:   logger.With("path", path),
		relist:   make(chan struct{}, 1),
		files:    map[string]*fileState{},
		notes:    map[string]string{},
	}
}

// Relist makes Run read the manifests again now, as its periodic relist does
// (systemctl reload). It never blocks.
func (f *File) Relist() {
	select {
	case f.relist <- struct{}{}:
	default:
	}
}

// Run sends the whole pod set on out at start and whenever it changes, until ctx
// ends. A missing path is not an error: the set is empty until it appears.
func (f *File) Run(ctx context.Context, out chan<- Update) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		f.logger.Warn("cannot watch manifests; relisting periodically only", "err", err)
		w = nil
	} else {
		defer w.Close()
	}
	var events <-chan fsnotify.Event
	var watchErrs <-chan error
	if w != nil {
		events, watchErrs = w.Events, w.Errors
	}
	ticker := time.NewTicker(f.period)
	defer ticker.Stop()
	settle := time.NewTimer(settleTime)
	settle.Stop()
	defer settle.Stop()

	for {
		f.watch(w)
		f.recheck = false
		if f.send(ctx, out, f.list()) != nil {
			return nil // ctx ended while sending: not an error
		}
		if f.recheck {
			settle.Reset(settleTime)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C:
		case <-f.relist:
		case <-settle.C:
		case ev := <-events:
			f.logger.Debug("manifest event", "file", ev.Name, "op", ev.Op.String())
			drain(events)
		case err := <-watchErrs:
			f.logger.Warn("watching manifests failed", "err", err)
			f.watching = "" // add the watch again
		}
	}
}

// Once sends the pod set once and returns: the source of run --once, which
// reads the manifests at start only. A file still being written (failing,
// changed less than settleTime ago) is read again once it has settled.
func (f *File) Once(ctx context.Context, out chan<- Update) error {
	for {
		f.recheck = false
		u := f.list()
		if !f.recheck {
			return f.send(ctx, out, u)
		}
		t := time.NewTimer(settleTime)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// drain takes the events already queued, so a burst causes one list.
func drain(events <-chan fsnotify.Event) {
	for {
		select {
		case <-events:
		default:
			return
		}
	}
}

// watch keeps an inotify watch on the directory, or on the single file's
// directory, adding it when that appears or comes back.
func (f *File) watch(w *fsnotify.Watcher) {
	if w == nil {
		return
	}
	target := f.path
	if fi, err := os.Stat(f.path); err != nil || !fi.IsDir() {
		target = filepath.Dir(f.path)
	}
	if f.watching == target && slices.Contains(w.WatchList(), target) {
		return
	}
	if f.watching != "" && f.watching != target {
		_ = w.Remove(f.watching) // it may be gone already
	}
	f.watching = ""
	if err := w.Add(target); err != nil {
		f.noteOnce(target, "watch", "Cannot watch manifest directory yet; relisting periodically", "dir", target, "err", err)
		return
	}
	delete(f.notes, target)
	f.watching = target
}

// send sends u unless it says the same as the last one sent; the first is always
// sent, so the source counts as seen even when it is empty.
func (f *File) send(ctx context.Context, out chan<- Update, u Update) error {
	fp := fingerprint(u)
	if f.sent && fp == f.last {
		return nil
	}
	select {
	case out <- u:
		f.sent, f.last = true, fp
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func fingerprint(u Update) string {
	var b strings.Builder
	for _, p := range u.Pods {
		fmt.Fprintf(&b, "pod %s %s\n", p.Origin, p.UID)
	}
	for _, p := range u.Problems {
		fmt.Fprintf(&b, "problem %s %s\n", p.Origin, p.Err)
	}
	return b.String()
}

// list reads the path and returns the update it makes.
func (f *File) list() Update {
	fi, err := os.Stat(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !f.missing {
			f.logger.Info("manifest path does not exist yet; watching for it")
		}
		f.missing = true
		f.files = map[string]*fileState{}
		return f.update(nil)
	case err != nil:
		// Keep what we had: an unreadable path says nothing about the pods.
		f.logger.Warn("cannot read manifest path", "err", err)
		return f.update(f.paths())
	}
	f.missing = false
	if !fi.IsDir() {
		f.readFile(f.path, fi.ModTime())
		f.forgetAllBut([]string{f.path})
		return f.update([]string{f.path})
	}
	entries, err := os.ReadDir(f.path)
	if err != nil {
		f.logger.Warn("cannot read manifest directory", "err", err)
		return f.update(f.paths())
	}
	var paths []string
	for _, e := range entries {
		p := filepath.Join(f.path, e.Name())
		if skip, warn := manifest.Skip(e.Name()); skip {
			if warn {
				f.noteOnce(p, "backup", "ignoring a file that looks like a backup or editor leftover", "file", p)
			}
			continue
		}
		fi, err := os.Stat(p) // follows symlinks, as the kubelet does
		switch {
		case vanished(p, err):
			// Removed since the directory was read: the next list drops it.
		case err != nil:
			f.noteOnce(p, "stat", "cannot read manifest file", "file", p, "err", err)
		case fi.IsDir():
			f.noteOnce(p, "dir", "not recursing into a subdirectory of the manifest path", "file", p)
		case !fi.Mode().IsRegular():
			f.noteOnce(p, "irregular", "ignoring a manifest path that is not a regular file", "file", p, "mode", fi.Mode().String())
		default:
			delete(f.notes, p)
			f.readFile(p, fi.ModTime())
			paths = append(paths, p)
		}
	}
	f.forgetAllBut(paths)
	return f.update(paths)
}

// noteOnce logs msg about path once until the situation changes.
func (f *File) noteOnce(path, kind, msg string, args ...any) {
	if f.notes[path] == kind {
		return
	}
	f.notes[path] = kind
	f.logger.Warn(msg, args...)
}

func (f *File) paths() []string {
	out := make([]string, 0, len(f.files))
	for p := range f.files {
		out = append(out, p)
	}
	slices.Sort(out)
	return out
}

// forgetAllBut drops the state of files that are gone: their pods leave the set.
func (f *File) forgetAllBut(paths []string) {
	for p := range f.files {
		if !slices.Contains(paths, p) {
			delete(f.files, p)
		}
	}
	for p := range f.notes {
		if p != f.watching && !slices.Contains(paths, p) {
			if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
				delete(f.notes, p)
			}
		}
	}
}

// readFile parses path when its content changed since the last read, logging
// warnings and errors once per content. A failure of a file changed less than
// settleTime ago leaves its state as it was and asks for a recheck.
func (f *File) readFile(path string, modified time.Time) {
	data, err := readAtMost(path, manifest.MaxSize)
	st := f.files[path]
	if st == nil {
		st = &fileState{}
		f.files[path] = st
	}
	age := time.Since(modified)
	settling := age >= 0 && age < settleTime
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) { // removed between listing and reading
			delete(f.files, path)
			return
		}
		if settling {
			f.recheck = true
			return
		}
		if st.err == nil || st.err.Error() != err.Error() {
			f.logger.Warn("Cannot read manifest file", "file", path, "err", err)
		}
		st.err, st.sum = err, [sha256.Size]byte{}
		return
	}
	sum := sha256.Sum256(data)
	if sum == st.sum && (st.pods != nil || st.err != nil) {
		return
	}
	pods, warnings, err := manifest.ParseFile(data, path, f.nodeName)
	if err != nil && settling {
		f.recheck = true
		return
	}
	st.sum = sum
	for _, w := range warnings {
		f.logger.Warn("manifest warning", "file", path, "warning", w)
	}
	if err != nil {
		st.err = err
		attrs := []any{"file", path, "err", err}
		if st.pods != nil {
			attrs = append(attrs, "kept", st.pods[0].Name)
		}
		f.logger.Error("invalid manifest; ignoring it", attrs...)
		return
	}
	st.err, st.pods = nil, pods
}

// ReadManifest reads the manifest file at path as the daemon does: a
// regular file (symlinks followed), at most manifest.MaxSize bytes. A FIFO,
// socket or device is refused without blocking on it.
func ReadManifest(path string) ([]byte, error) {
	return readAtMost(path, manifest.MaxSize)
}

func readAtMost(path string, limit int64) ([]byte, error) {
	// O_NONBLOCK: opening a FIFO for reading would wait for a writer.
	fh, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	// The errors below do not repeat path: every caller names the file.
	fi, err := fh.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	data, err := io.ReadAll(io.LimitReader(fh, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	return data, nil
}

// update builds the set from the state of paths: every good pod (the last good
// one for files that turned bad), and a Problem per unusable file.
//
// A pod keeps the config.seen time it first had for as long as it stays in the
// set: the store only has a time for pods that were started.
func (f *File) update(paths []string) Update {
	u := Update{Source: manifest.SourceFile, Pods: []manifest.Pod{}}
	seenAt := map[types.UID]time.Time{}
	seen := func(uid types.UID) time.Time {
		t, ok := f.seenAt[uid]
		if !ok {
			t = time.Now()
			if f.seen != nil {
				t = f.seen(uid)
			}
		}
		seenAt[uid] = t
		return t
	}
	defer func() { f.seenAt = seenAt }()
	for _, p := range paths {
		st := f.files[p]
		if st == nil {
			continue
		}
		for _, pod := range st.pods {
			pod.Pod = pod.Pod.DeepCopy()
			manifest.Stamp(pod, seen)
			u.Pods = append(u.Pods, pod)
		}
		if st.err != nil {
			u.Problems = append(u.Problems, manifest.Problem{Origin: p, Err: st.err})
		}
	}
	return u
}

// vanished reports whether path is gone, as opposed to a symlink whose target
// is missing, which is worth a message.
func vanished(path string, err error) bool {
	if !errors.Is(err, fs.ErrNotExist) {
		return false
	}
	_, lerr := os.Lstat(path)
	return errors.Is(lerr, fs.ErrNotExist)
}
