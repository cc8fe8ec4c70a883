package source

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
	"github.com/staticpodd/staticpodd/agent/tick"
)

// File delivers the static pods of a directory (one pod per file, not recursive)
// or of a single file, as the kubelet's file source does: a list at start, then on
// every inotify event and every period. Unlike the kubelet:
//   - a manifest that turns invalid keeps its last good pod (reported as a
//     Problem too), across daemon restarts when Store is set;
//   - a manifest renamed away that comes back unchanged within settleTime
//     (an editor saving by moving the old file away) changes nothing, and a
//     file that cannot be read keeps what it gave; one unlinked (rm) is
//     removed at once, as for the kubelet, and when it is back by the next
//     list its pods carry a new Recreated token: the pod restarts;
//   - backups and editor leftovers are skipped with a warning;
//   - what leads to the manifests is watched too: the directory holding the
//     path (a single file, a directory made or deleted, a symlink swapped),
//     each symlink on the way, and where symlinked manifests lead.
type File struct {
	path     string
	abs      string // path made absolute, to resolve and watch
	nodeName string
	period   time.Duration
	seen     manifest.SeenFunc
	logger   *slog.Logger
	relist   chan struct{}      // Relist asks Run to list now
	periodc  chan time.Duration // SetPeriod hands Run a new period
	// lists counts Run's lists of the manifests, sent or not: what a
	// test waits for before it says a relist changed nothing.
	lists atomic.Uint64
	// reads counts the manifests read (opened and hashed), for the tests:
	// a relist of unchanged manifests reads none.
	reads atomic.Uint64

	// Store, when set before Run, keeps the manifest of each started pod
	// with its state, so that the last good pod of a manifest that is
	// invalid when the daemon starts is found again.
	Store Store
	// Credentials, when set before Run, is the directory the values of
	// Secrets' credentials are read from ($CREDENTIALS_DIRECTORY).
	Credentials string

	// Owned by Run's goroutine.
	files   map[string]*fileState   // by path
	seenAt  map[types.UID]time.Time // config.seen of the pods of the last update
	notes   map[string]string       // one-time messages already logged, by path
	watches map[string]*watchDir    // by real directory path
	last    string                  // fingerprint of the last update sent
	digests map[*v1.Pod]string      // digest of each parsed pod of the last list
	// objectDigests is digests' of the parsed objects.
	objectDigests map[*objects.Object]string
	// The maps and the buffer the next list's fingerprint is made in:
	// swapped with digests and objectDigests, and kept, so that a relist
	// that finds nothing changed allocates none of them.
	nextDigests       map[*v1.Pod]string
	nextObjectDigests map[*objects.Object]string
	fpBuf             []byte
	present           map[string]bool // list's, kept for the next
	sent              bool
	missing           bool // the path did not exist at the last list
	isDir             bool // the path was a directory at the last list
	// recheckAt is when a list must run again: a file that failed while it
	// may still be being written, or one that disappeared, settles then.
	recheckAt time.Time
	// unlinked are the manifests (keys of files) unlinked since the last
	// list; removed, those unlinked and not back yet, by when: one back
	// within settleTime is recreated too.
	unlinked map[string]bool
	removed  map[string]time.Time
	// realDir is, as of the last list, the real path of the manifest
	// directory, or of the one holding the manifest file.
	realDir string
	// readAll makes the next list read every manifest, whatever its stat
	// says: Relist does, and the periodic relist once every fullRelist, for
	// a file system whose stat may not follow its content (a FUSE one that
	// makes its times up, a network one's attribute cache). Every other
	// periodic relist reads only the manifests whose stat changed.
	readAll bool
	// fullAt is when the periodic relist next reads every manifest.
	fullAt time.Time
}

// fullRelist is how often the periodic relist reads every manifest, whatever
// its stat says; the others read only the manifests whose stat (device,
// inode, size, mtime, ctime: filestamp) changed. A write always moves the
// ctime, so this is for file systems whose stat does not tell (a FUSE one
// that makes its times up), which are then as late as this at worst.
const fullRelist = 10 * time.Minute

// recreates counts the manifests found back after an unlink, in every
// source of the process: each return is a new, higher Recreated token.
var recreates atomic.Uint64

// settleTime is how long a manifest may be in flux before the source acts on
// it. A file that fails to parse or read less than settleTime after its last
// change counts as still being written (cp, scp and editors that write in
// place) and is read again then; a manifest that disappears is taken as
// removed once it has stayed away that long, so an editor that moves the file
// away and writes it again (Emacs' first save, vim with backupcopy=no) does
// not stop the pod. A manifest unlinked (rm, os.Remove: inotify's IN_DELETE)
// is removed at once, as the kubelet does: nobody unlinks a file to save it.
// Good content is used at once.
const settleTime = 500 * time.Millisecond

// NewFile returns a source for path, a directory or one file, on node nodeName,
// relisting every period (fileCheckFrequency). seen gives the first-seen time of a
// pod UID for the kubernetes.io/config.seen annotation (nil: the current time).
func NewFile(path, nodeName string, period time.Duration, seen manifest.SeenFunc, logger *slog.Logger) *File {
	path = strings.TrimRight(path, string(os.PathSeparator))
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	return &File{
		path:     path,
		abs:      abs,
		nodeName: nodeName,
		period:   period,
		seen:     seen,
		logger:   logger.With("path", path),
		relist:   make(chan struct{}, 1),
		periodc:  make(chan time.Duration, 1),
		files:    map[string]*fileState{},
		notes:    map[string]string{},
		watches:  map[string]*watchDir{},
		unlinked: map[string]bool{},
		removed:  map[string]time.Time{},
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

// SetPeriod changes how often Run relists (fileCheckFrequency, changed by a
// reload); the next relist is one new period away. It never blocks: of
// several calls before Run sees them, the last wins.
func (f *File) SetPeriod(d time.Duration) {
	if d <= 0 {
		return
	}
	for {
		select {
		case f.periodc <- d:
			return
		default:
		}
		select {
		case <-f.periodc: // drop the older value
		default:
		}
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
	ticker := tick.New(f.period)
	defer ticker.Stop()
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	defer settle.Stop()
	// Whether the path is a directory decides whether its entries are
	// watched; known before the first list, so that the first watch has
	// them: a manifest unlinked right after the first update is then an
	// event, as later ones are.
	if fi, err := os.Stat(f.path); err == nil {
		f.isDir = fi.IsDir()
	}

	for {
		f.recheckAt = time.Time{}
		// Watch before listing, so that a change made while the list runs is
		// an event. A watch the list made necessary (the directory appeared,
		// a symlinked manifest leads somewhere new) is added after it, and
		// the list runs again: a change made in between had no watch.
		f.watch(w, f.links())
		// Unlinks already queued are noted first: a list the ticker or a
		// recheck woke before the select took an unlink's event would take
		// the manifest for one renamed away, and wait settleTime.
		f.drain(events)
		if f.readAll || f.fullAt.IsZero() {
			f.fullAt = time.Now().Add(fullRelist)
		}
		u := f.list()
		f.lists.Add(1)
		f.readAll = false
		if f.send(ctx, out, u) != nil {
			return nil // ctx ended while sending: not an error
		}
		if f.watch(w, f.links()) {
			continue
		}
		settle.Stop()
		if !f.recheckAt.IsZero() {
			settle.Reset(time.Until(f.recheckAt))
		}
	wait:
		for {
			select {
			case <-ctx.Done():
				return nil
			case now := <-ticker.C:
				// An idle daemon's relist reads nothing: 100 manifests
				// read and hashed every 20 s were most of its CPU at rest.
				if !now.Before(f.fullAt) {
					f.readAll = true
				}
				break wait
			case <-f.relist:
				f.readAll = true
				break wait
			case d := <-f.periodc:
				ticker.Reset(d)
			case <-settle.C:
				break wait
			case ev := <-events:
				// Before relevant: the unlinks of a directory deleted
				// whole come after its watch is gone. An unlink noted
				// is always listed at once: one that came while the
				// last list ran left the manifest waiting as if renamed
				// away.
				if !f.noteUnlink(ev) && !f.relevant(ev) {
					continue
				}
				f.logger.Debug("manifest event", "file", ev.Name, "op", ev.Op.String())
				f.drain(events)
				break wait
			case err := <-watchErrs:
				if errors.Is(err, fsnotify.ErrEventOverflow) {
					// Events were lost: only a full list knows what changed.
					f.logger.Warn("inotify queue overflowed; listing every manifest again")
				} else {
					f.logger.Warn("watching manifests failed; adding the watches again", "err", err)
					f.unwatchAll(w)
				}
				break wait
			}
		}
	}
}

// Once sends the pod set once and returns: the source of run --once, which
// reads the manifests at start only. A file still being written (failing,
// changed less than settleTime ago) is read again once it has settled.
func (f *File) Once(ctx context.Context, out chan<- Update) error {
	for {
		f.recheckAt = time.Time{}
		u := f.list()
		if f.recheckAt.IsZero() {
			return f.send(ctx, out, u)
		}
		t := time.NewTimer(time.Until(f.recheckAt))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// drain takes the events already queued, so a burst causes one list; the
// unlinks among them are noted.
func (f *File) drain(events <-chan fsnotify.Event) {
	for {
		select {
		case ev := <-events:
			f.noteUnlink(ev)
		default:
			return
		}
	}
}

// noteUnlink records that ev unlinked a manifest the source has: IN_DELETE
// of its directory entry (fsnotify's Remove; a rename away is Rename). The
// next list removes it at once, or gives its pods a new Recreated token when
// it is back: a directory deleted with its manifests (rm -rf) unlinks them.
// It reports whether it noted one.
func (f *File) noteUnlink(ev fsnotify.Event) bool {
	if !ev.Has(fsnotify.Remove) {
		return false
	}
	// By where the manifests were at the last list: the directory may be
	// gone already, and its watch with it.
	dir, base := filepath.Dir(ev.Name), filepath.Base(ev.Name)
	if f.isDir && ev.Name == f.realDir {
		// The directory itself went (rm -rf; seen by its parent's watch,
		// which stays): every manifest in it was unlinked, whether or not
		// their own events came before the directory's watch went.
		noted := false
		for p, st := range f.files {
			if st.has() {
				f.unlinked[p] = true
				noted = true
			}
		}
		return noted
	}
	var key string
	switch {
	case dir != f.realDir:
	case f.isDir:
		key = filepath.Join(f.path, base)
	case base == filepath.Base(f.abs):
		key = f.path
	}
	if st := f.files[key]; st != nil && st.has() {
		f.unlinked[key] = true
		return true
	}
	return false
}

// links are the manifests that are symlinks.
func (f *File) links() []string {
	var out []string
	for p, st := range f.files {
		if st.link && st.gone.IsZero() {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}

// send sends u unless it says the same as the last one sent; the first is always
// sent, so the source counts as seen even when it is empty. The Store hears
// of the pods first, so that it has their manifests when they start.
func (f *File) send(ctx context.Context, out chan<- Update, u Update) error {
	fp := u.fingerprint
	if f.sent && fp == f.last {
		return nil
	}
	if f.Store != nil {
		f.Store.Offer(manifest.SourceFile, f.manifests())
	}
	select {
	case out <- u:
		f.sent, f.last = true, fp
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// manifests are the contents the pods of the set come from.
func (f *File) manifests() []Manifest {
	var out []Manifest
	for p, st := range f.files {
		for _, pod := range st.pods {
			out = append(out, Manifest{UID: pod.UID, Source: manifest.SourceFile, Origin: p, Data: st.data})
		}
	}
	return out
}

// fingerprint says what the update of paths would: each pod's origin, UID
// and digest, each object's (objs, with their credentials' values), and each
// problem (those of the files, and credProblems). A parsed pod is never
// changed (update stamps copies), so its digest is computed once per parse
// and kept as long as a list still has it: a relist that reads 100
// unchanged manifests no longer marshals 100 pods to find that nothing
// changed. So is an object's, unless its credentials' values make it anew.
func (f *File) fingerprint(paths []string, objs []*objects.Object, credProblems []manifest.Problem) string {
	b := f.fpBuf[:0]
	if f.nextDigests == nil {
		f.nextDigests, f.nextObjectDigests = map[*v1.Pod]string{}, map[*objects.Object]string{}
	}
	digests, objectDigests := f.nextDigests, f.nextObjectDigests
	for _, p := range paths {
		st := f.files[p]
		if st == nil {
			continue
		}
		for _, pod := range st.pods {
			d, ok := f.digests[pod.Pod]
			if !ok {
				d = digest(pod)
			}
			digests[pod.Pod] = d
			// As fmt's "pod %s %s %s %d\n", without its allocations per pod.
			b = append(b, "pod "...)
			b = append(b, pod.Origin...)
			b = append(b, ' ')
			b = append(b, pod.UID...)
			b = append(b, ' ')
			b = append(b, d...)
			b = append(b, ' ')
			b = strconv.AppendUint(b, st.recreated, 10)
			b = append(b, '\n')
		}
	}
	for _, o := range objs {
		d, ok := f.objectDigests[o]
		if !ok {
			d = objectDigest(o)
		}
		if len(o.Credentials) == 0 { // filled: made anew at every list
			objectDigests[o] = d
		}
		b = fmt.Appendf(b, "object %s %s %s\n", o.Origin, o.Key(), d)
	}
	for _, p := range paths {
		if st := f.files[p]; st != nil && st.err != nil {
			b = fmt.Appendf(b, "problem %s %s\n", p, st.err)
		}
	}
	for _, p := range credProblems {
		b = fmt.Appendf(b, "problem %s %s\n", p.Origin, p.Err)
	}
	f.digests, f.nextDigests = digests, f.digests
	f.objectDigests, f.nextObjectDigests = objectDigests, f.objectDigests
	// The spares keep their room, not the pods and objects of the list
	// before: those of a changed manifest go now.
	clear(f.nextDigests)
	clear(f.nextObjectDigests)
	f.fpBuf = b
	if string(b) == f.last {
		return f.last // as at rest: nothing to copy
	}
	return string(b)
}

// list reads the path and returns the update it makes.
func (f *File) list() Update {
	now := time.Now()
	// The files that are there, readable or not; the map is kept for the
	// next list.
	if f.present == nil {
		f.present = map[string]bool{}
	}
	present := f.present
	clear(present)
	fi, err := os.Stat(f.path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		if !f.missing {
			f.logger.Info("manifest path does not exist; watching for it")
		}
		f.missing = true
	case err != nil:
		// Keep what we had: an unreadable path says nothing about the pods.
		f.noteOnce(f.path, "stat", "cannot read manifest path; keeping its pods", "err", err)
		f.restoreAll()
		return f.update(f.paths())
	case !fi.IsDir():
		delete(f.notes, f.path)
		f.missing, f.isDir = false, false
		if f.readFile(f.path, false, fi, now) {
			present[f.path] = true
		}
	default:
		f.missing, f.isDir = false, true
		entries, err := os.ReadDir(f.path)
		if err != nil {
			f.noteOnce(f.path, "readdir", "cannot read manifest directory; keeping its pods", "err", err)
			f.restoreAll()
			return f.update(f.paths())
		}
		delete(f.notes, f.path)
		for _, e := range entries {
			p := filepath.Join(f.path, e.Name())
			if skip, warn := manifest.Skip(e.Name()); skip {
				if warn {
					f.noteOnce(p, "backup", "ignoring a file that looks like a backup or editor leftover", "file", p)
				}
				continue
			}
			statAt := time.Now()
			fi, err := os.Stat(p) // follows symlinks, as the kubelet does
			switch {
			case vanished(p, err):
				// Removed since the directory was read: gone, as below.
			case errors.Is(err, fs.ErrNotExist):
				f.noteOnce(p, "dangling", "ignoring a symlink that leads nowhere", "file", p)
			case err != nil:
				// It is there but cannot be looked at (EACCES, ELOOP, EIO):
				// keep what it gave, as for a file that cannot be read.
				present[p] = true
				f.failed(p, err, false)
			case fi.IsDir():
				f.noteOnce(p, "dir", "not recursing into a subdirectory of the manifest path", "file", p)
			case !fi.Mode().IsRegular():
				f.noteOnce(p, "irregular", "ignoring a manifest path that is not a regular file", "file", p, "mode", fi.Mode().String())
			default:
				delete(f.notes, p)
				if f.readFile(p, e.Type()&fs.ModeSymlink != 0, fi, statAt) {
					present[p] = true
				}
			}
		}
	}
	dir := f.abs
	if !f.isDir {
		dir = filepath.Dir(f.abs)
	}
	if r := resolve(dir); r.real != "" {
		f.realDir = r.real
	}
	f.recreated(present, now)
	f.settleGone(present, now)
	return f.update(f.paths())
}

// recreated gives the manifests unlinked since the last list that are back
// a new Recreated token: the pod stops and starts again, as the kubelet's
// REMOVE and ADD of one UID do. Those not back are removed at once; one back
// within settleTime (the list ran between the unlink and the write) is
// recreated too.
func (f *File) recreated(present map[string]bool, now time.Time) {
	for p, at := range f.removed {
		if st := f.files[p]; present[p] && st != nil && now.Sub(at) < settleTime {
			f.unlinked[p] = true
		}
		if present[p] || now.Sub(at) >= settleTime {
			delete(f.removed, p)
		}
	}
	for p := range f.unlinked {
		st := f.files[p]
		switch {
		case st == nil:
		case present[p]:
			st.recreated = recreates.Add(1)
			f.logger.Info("manifest unlinked and written again; restarting its pods", "file", p)
		case st.has():
			f.logger.Info("manifest removed", append([]any{"file", p}, st.kept()...)...)
			delete(f.files, p)
			f.removed[p] = now
		}
	}
	clear(f.unlinked)
}

// settleGone marks the files that are not there as gone, and forgets those
// gone for settleTime: their pods leave the set. Until then a file keeps its
// pods, so that one moved away and written again changes nothing.
func (f *File) settleGone(present map[string]bool, now time.Time) {
	for p, st := range f.files {
		if present[p] {
			st.gone = time.Time{}
			continue
		}
		if st.gone.IsZero() {
			st.gone = now
		}
		if !st.has() || now.Sub(st.gone) >= settleTime {
			if st.has() {
				f.logger.Info("manifest removed", append([]any{"file", p, "goneFor", now.Sub(st.gone).Round(time.Millisecond)}, st.kept()...)...)
			}
			delete(f.files, p)
			continue
		}
		f.recheck(st.gone.Add(settleTime))
	}
	for p := range f.notes {
		if p != f.path && !present[p] && f.watches[p] == nil {
			if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
				delete(f.notes, p)
			}
		}
	}
}

// recheck makes Run list again at t at the latest.
func (f *File) recheck(t time.Time) {
	if f.recheckAt.IsZero() || t.Before(f.recheckAt) {
		f.recheckAt = t
	}
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

// update builds the set from the state of paths: every good pod (the last good
// one for files that turned bad), and a Problem per unusable file.
//
// A pod keeps the config.seen time it first had for as long as it stays in the
// set: the store only has a time for pods that were started.
//
// The objects are every file's (the last good ones of files that turned
// bad), their credentials read again at each list: a credential changed
// (systemctl restart with new ones, or a test) is a new Secret.
func (f *File) update(paths []string) Update {
	var objs []*objects.Object
	for _, p := range paths {
		if st := f.files[p]; st != nil {
			objs = append(objs, st.objects...)
		}
	}
	objs, credProblems := fillCredentials(f.Credentials, objs)
	fp := f.fingerprint(paths, objs, credProblems)
	if f.sent && fp == f.last {
		// What was sent stands: send drops it, and the pods need no copies.
		return Update{Source: manifest.SourceFile, fingerprint: fp}
	}
	u := Update{Source: manifest.SourceFile, Pods: []manifest.Pod{}, Objects: objs, fingerprint: fp}
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
		for i, pod := range st.pods {
			// The stamped pod replaces the parsed one: the next update
			// hands the same pod again, and the parse's garbage goes.
			pod, copied := manifest.Stamped(pod, seen(pod.UID))
			if copied {
				if d, ok := f.digests[st.pods[i].Pod]; ok { // config.seen is not in it
					delete(f.digests, st.pods[i].Pod)
					f.digests[pod.Pod] = d
				}
				st.pods[i].Pod = pod.Pod
			}
			pod.Recreated = st.recreated
			u.Pods = append(u.Pods, pod)
		}
		if st.err != nil {
			u.Problems = append(u.Problems, manifest.Problem{Origin: p, Err: st.err})
		}
		for _, w := range st.warnings {
			u.Problems = append(u.Problems, manifest.Problem{Origin: p, Err: errors.New(w.String()), Warning: true})
		}
	}
	u.Problems = append(u.Problems, credProblems...)
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
