// Package hostfiles watches the host files a pod names in its
// staticpodd.io/restart-on-change annotation and tells each one's digest:
// the hash of its contents, read with bounds, or why there is none.
package hostfiles

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/staticpodd/staticpodd/agent/filestamp"
	"github.com/staticpodd/staticpodd/agent/tick"
)

// MaxSize is the most of a file that is hashed: kubeconfigs, keys and
// certificates are a few KiB. A larger file has the digest Unusable says.
const MaxSize = 4 << 20

// Absent is the digest of a file that does not exist: a stable value, so a
// missing file is a pod like any other, not a restart at every look.
const Absent = "absent"

// maxDirs bounds the directories watched with inotify; beyond them, the
// periodic relist still sees every change.
const maxDirs = 512

// racy is how recent a change may be for a file's stamp not to be trusted
// (filestamp.Stamp.Settled). A variable for the tests only.
var racy = 2 * time.Second

// settle is how long after a directory's first event its files are read: an
// editor that renames a file away and writes it back, or a tool that
// writes a temporary file and renames it over, is one change, not two. Not
// after the last event: a directory always busy would never be read.
const settle = 200 * time.Millisecond

// Digest returns the digest of the file at path: "sha256:<hex>" of its
// contents, Absent, or "unusable: <why>" (not a regular file, larger than
// MaxSize, a loop of symlinks, no permission). It never opens a FIFO or a
// device (openRegular), and reads a regular file at most MaxSize+1 bytes,
// hashed as it is read.
func Digest(path string) string {
	d, _ := digest(path)
	return d
}

// digest is Digest, and the stamp of the regular file read (zero for
// anything else): the same stamp later is the same contents.
func digest(path string) (string, filestamp.Stamp) {
	readAt := time.Now()
	f, fi, err := openRegular(path)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return Absent, filestamp.Stamp{}
	}
	if err != nil {
		return unusable(err), filestamp.Stamp{}
	}
	if f == nil {
		return fmt.Sprintf("unusable: not a regular file (%s)", fi.Mode().Type()), filestamp.Stamp{}
	}
	defer f.Close()
	if fi.Size() > MaxSize {
		return fmt.Sprintf("unusable: larger than %d bytes", MaxSize), filestamp.Stamp{}
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, MaxSize+1))
	switch {
	case err != nil:
		return unusable(err), filestamp.Stamp{}
	case n > MaxSize: // it grew while it was read
		return fmt.Sprintf("unusable: larger than %d bytes", MaxSize), filestamp.Stamp{}
	}
	// The stamp from before the read: a write during it changes the file's
	// ctime after, and the next look reads it again. One changed within
	// racy before the read vouches for nothing: read again at the next look.
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), filestamp.Of(fi).Settled(readAt, racy)
}

// unusable is the digest of a file that cannot be read: the error without
// the path, which the caller knows, so that it is the same at every look.
func unusable(err error) string {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err
	}
	return "unusable: " + err.Error()
}

// Watcher keeps the digests of the files it was asked about up to date: it
// watches their directories with inotify (a directory, not the file: a file
// renamed over or away and back is a new inode), reads again a directory's
// files once its events settle, and every file at each relist.
type Watcher struct {
	logger  *slog.Logger
	relist  time.Duration
	changed chan struct{}
	wake    chan struct{}

	mu      sync.Mutex       // guards digests
	digests map[string]entry // path -> its digest last read
}

// entry is a file's digest, and the stamp of the file it was read from.
type entry struct {
	digest string
	stamp  filestamp.Stamp
}

// New returns a watcher that relists every relist; Run runs it.
func New(relist time.Duration, logger *slog.Logger) *Watcher {
	return &Watcher{logger: logger, relist: relist, changed: make(chan struct{}, 1), wake: make(chan struct{}, 1),
		digests: map[string]entry{}}
}

// Changed receives after a digest changed.
func (w *Watcher) Changed() <-chan struct{} { return w.changed }

// Digests returns the digest of each path, read now for a path not watched
// yet, which is watched from now on.
func (w *Watcher) Digests(paths []string) []string {
	out := make([]string, len(paths))
	w.mu.Lock()
	defer w.mu.Unlock()
	added := false
	for i, p := range paths {
		e, ok := w.digests[p]
		if !ok {
			e.digest, e.stamp = digest(p)
			w.digests[p] = e
			added = true
		}
		out[i] = e.digest
	}
	if added {
		signal(w.wake)
	}
	return out
}

// Keep stops watching every path not in keep: their directories' watches
// go, and the inotify instance with the last of them.
func (w *Watcher) Keep(keep map[string]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	dropped := false
	for p := range w.digests {
		if !keep[p] {
			delete(w.digests, p)
			dropped = true
		}
	}
	if dropped {
		signal(w.wake)
	}
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Run watches until ctx ends. Its inotify instance is made when there is a
// first file to watch, and closed once Keep dropped the last: a daemon whose
// pods name none holds none. Without
// inotify, it relists only.
func (w *Watcher) Run(ctx context.Context) {
	var fw *fsnotify.Watcher
	defer func() {
		if fw != nil {
			fw.Close()
		}
	}()
	var events <-chan fsnotify.Event
	var errs <-chan error
	// The relist ticks only while there are files to read again: most
	// daemons' pods name none, and an idle daemon's every wake-up costs.
	relist := tick.New(w.relist)
	defer relist.Stop()
	relist.Stop()
	var tickc <-chan time.Time
	settled := time.NewTimer(time.Hour)
	settled.Stop()
	dirty := map[string]bool{} // directories with events not read yet; settled runs while it has any
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-events:
			if len(dirty) == 0 {
				settled.Reset(settle)
			}
			dirty[filepath.Dir(ev.Name)], dirty[ev.Name] = true, true
		case err := <-errs:
			// A queue overflow lost events: read everything.
			w.logger.Warn("watching restart-on-change files", "err", err)
			w.reread(nil)
		case <-settled.C:
			w.reread(dirty)
			clear(dirty)
		case <-w.wake:
			if !w.watching() {
				// No pod names a file any more: hold nothing.
				if fw != nil {
					fw.Close()
					fw, events, errs = nil, nil, nil
				}
				clear(dirty)
				settled.Stop()
				break
			}
			if fw == nil {
				var err error
				if fw, err = fsnotify.NewWatcher(); err != nil {
					w.logger.Warn("cannot watch restart-on-change files; relisting them periodically", "err", err, "period", w.relist)
				} else {
					events, errs = fw.Events, fw.Errors
				}
			}
			// What changed before the watch was added: read again.
			w.watch(fw)
			w.reread(nil)
		case <-tickc:
			w.watch(fw)
			w.reread(nil)
		}
		switch watching := w.watching(); {
		case watching && tickc == nil:
			relist.Reset(w.relist)
			tickc = relist.C
		case !watching && tickc != nil:
			relist.Stop()
			tickc = nil
		}
	}
}

// watching reports whether there is a file to watch.
func (w *Watcher) watching() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.digests) > 0
}

// watch adds a watch on the directory of every path that has none (a
// directory made since, or made again).
func (w *Watcher) watch(fw *fsnotify.Watcher) {
	if fw == nil {
		return
	}
	w.mu.Lock()
	want := map[string]bool{}
	for p := range w.digests {
		want[filepath.Dir(p)] = true
	}
	w.mu.Unlock()
	have := map[string]bool{}
	for _, d := range fw.WatchList() {
		if !want[d] {
			_ = fw.Remove(d)
			continue
		}
		have[d] = true
	}
	for d := range want {
		if have[d] || len(have) >= maxDirs {
			continue
		}
		if err := fw.Add(d); err == nil {
			have[d] = true
		}
		// A directory that does not exist yet is added at a later relist.
	}
}

// reread reads again the paths in the directories of dirs (all, with dirs
// nil), and says so on Changed when a digest changed.
func (w *Watcher) reread(dirs map[string]bool) {
	w.mu.Lock()
	paths := map[string]filestamp.Stamp{}
	for p, e := range w.digests {
		if dirs == nil || dirs[filepath.Dir(p)] || dirs[p] {
			paths[p] = e.stamp
		}
	}
	w.mu.Unlock()
	// Read without the lock: Digests, under the agent's, must not wait on
	// another file's read. A regular file whose stamp is the one read is
	// not read again: a directory busy with other files, or a relist, costs
	// a stat per file, not a hash of up to MaxSize.
	now := make(map[string]entry, len(paths))
	for p, st := range paths {
		if fi, err := os.Stat(p); err == nil && filestamp.Current(st, filestamp.Of(fi)) {
			continue
		}
		var e entry
		e.digest, e.stamp = digest(p)
		now[p] = e
	}
	w.mu.Lock()
	changed := false
	for p, e := range now {
		old, ok := w.digests[p]
		if !ok {
			continue
		}
		w.digests[p] = e
		if old.digest != e.digest {
			changed = true
			w.logger.Info("restart-on-change file changed", "file", p, "digest", e.digest)
		}
	}
	w.mu.Unlock()
	if changed {
		signal(w.changed)
	}
}
