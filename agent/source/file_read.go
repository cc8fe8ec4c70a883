package source

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	utilio "k8s.io/utils/io"

	"github.com/staticpodd/staticpodd/agent/filestamp"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
)

// racyWindow is how long before a read a manifest must have last changed
// for its stat to stand for the content read (filestamp.Stamp.Settled).
const racyWindow = settleTime

// fileState is what one manifest file gave the last time its content changed.
type fileState struct {
	sum [sha256.Size]byte
	// stamp is the file's stat when the content of sum was read; a zero
	// stamp is never current (filestamp.Current).
	stamp filestamp.Stamp
	// data is the content of the last good parse as the Store keeps it:
	// without the values of its Secrets (manifest.WithoutSecretValues).
	data []byte
	pods []manifest.Pod // the last good parse; kept when the file turns bad
	// objects are the ConfigMaps and Secrets of the last good parse, kept
	// with its pods.
	objects []*objects.Object
	good    bool  // pods and objects are those of a good parse (a file may have neither)
	err     error // why the current content is unusable, nil when it is fine
	// warnings are what the parse of the current, usable content said of
	// it (unknown fields ignored, a key given twice).
	warnings []manifest.Warning
	link     bool // the directory entry is a symlink
	// gone is when the file was first found missing; zero while it is there.
	gone     time.Time
	restored bool // the Store was asked for a last good pod already
	// recreated is the token its pods carry (manifest.Pod.Recreated): set
	// when the file was unlinked and written again.
	recreated uint64
}

// has reports whether the file gives anything: pods or objects.
func (st *fileState) has() bool { return len(st.pods) > 0 || len(st.objects) > 0 }

// kept names what a file that turned bad keeps, for the log: its pod, or
// how many objects.
func (st *fileState) kept() []any {
	switch {
	case len(st.pods) > 0:
		return []any{"kept", st.pods[0].Name}
	case len(st.objects) > 0:
		return []any{"keptObjects", len(st.objects)}
	}
	return nil
}

// readFile parses path when its content changed since the last read, logging
// warnings and errors once per content. A failure of a file changed less than
// settleTime ago leaves its state as it was and asks for a recheck. It reports
// whether the file is there.
//
// A file whose stat is still the one its last read had, and had long enough
// before that read that no write can hide under it (filestamp.Current), is not
// read again but by Relist and one periodic relist in fullRelist (readAll):
// a burst of manifests, each an event and a list, would otherwise read every
// manifest already there again at each one, and each relist of an idle
// daemon all of them. The stat follows a symlink, as the read does: a
// symlinked manifest whose target is rewritten, or that leads to another
// file, has another stamp.
//
// fi is the list's stat of path (following symlinks), taken at statAt or
// after: the one stat a relist makes of a manifest that did not change.
func (f *File) readFile(path string, link bool, fi fs.FileInfo, statAt time.Time) bool {
	readAt := statAt
	stamp := filestamp.Of(fi)
	if st := f.files[path]; st != nil && !f.readAll && (st.good || st.err != nil) && filestamp.Current(st.stamp, stamp) {
		st.link = link
		return true
	}
	f.reads.Add(1)
	data, err := readAtMost(path, manifest.MaxSize)
	if errors.Is(err, fs.ErrNotExist) { // removed between listing and reading
		return false
	}
	settling := time.Since(fi.ModTime()) >= 0 && time.Since(fi.ModTime()) < settleTime
	if err != nil {
		if settling {
			f.recheck(fi.ModTime().Add(settleTime))
			f.state(path, link)
			f.restore(path)
			return true
		}
		f.failed(path, err, link)
		return true
	}
	st := f.state(path, link)
	sum := sha256.Sum256(data)
	if sum == st.sum && (st.good || st.err != nil) {
		st.stamp = stamp.Settled(readAt, racyWindow)
		return true
	}
	parsed := manifest.Check(data, manifest.SourceFile, path, f.nodeName)
	if len(parsed.Errors) > 0 && settling {
		f.recheck(fi.ModTime().Add(settleTime))
		f.restore(path)
		return true
	}
	st.sum, st.stamp = sum, stamp.Settled(readAt, racyWindow)
	for _, w := range parsed.Warnings {
		f.logger.Warn("manifest warning", "file", path, "field", w.Field, "warning", w.Message)
	}
	if len(parsed.Errors) > 0 {
		st.err, st.warnings = parsed.Err(), nil
		f.restore(path)
		f.logger.Error("invalid manifest; ignoring it", append([]any{"file", path, "err", st.err}, st.kept()...)...)
		return true
	}
	// What the Store keeps, and rollouts with a generation: the file
	// without the values of its Secrets, which are never at rest in clear.
	keep := parsed.WithoutSecretValues(data, manifest.SourceFile)
	st.err, st.pods, st.objects, st.good, st.data, st.warnings = nil, parsed.Pods, parsed.Objects, true, keep, parsed.Warnings
	return true
}

func (f *File) state(path string, link bool) *fileState {
	st := f.files[path]
	if st == nil {
		st = &fileState{}
		f.files[path] = st
	}
	st.link = link
	return st
}

// failed records that path is there but cannot be read: it keeps the pods it
// gave, and a problem says why.
func (f *File) failed(path string, err error, link bool) {
	st := f.state(path, link)
	if st.err == nil || st.err.Error() != err.Error() {
		f.logger.Warn("cannot read manifest file; keeping its pods", append([]any{"file", path, "err", err}, st.kept()...)...)
	}
	st.err, st.sum, st.stamp, st.warnings = err, [sha256.Size]byte{}, filestamp.Stamp{}, nil
	f.restore(path)
}

// restore gives a file that is there but unusable, and has no last good pod
// in memory (the daemon restarted since), the last good pod the Store kept
// with the pod's state: the one it ran last, with the ConfigMaps and Secrets
// written beside it then, but those Secrets with values of their own, which
// the Store never has (manifest.WithoutSecretValues): the pod's containers
// to be made wait for them as for any missing object. (The Store keeps the
// manifests of started pods: a file of objects only has none kept.)
func (f *File) restore(path string) {
	st := f.files[path]
	if st == nil || st.good || st.restored || f.Store == nil {
		return
	}
	st.restored = true
	var best *Manifest
	var parsed manifest.Parsed
	var data []byte
	kept := f.Store.Stored(manifest.SourceFile)
	for i := range kept {
		m := &kept[i]
		if m.Origin != path || (best != nil && !m.Seen.After(best.Seen)) {
			continue
		}
		// Kept by an older daemon, the copy may still hold Secret values:
		// they are neither used nor offered on.
		d := manifest.WithoutSecretValues(m.Data, manifest.SourceFile)
		p := manifest.Check(d, manifest.SourceFile, path, f.nodeName)
		if len(p.Errors) > 0 || len(p.Pods) != 1 || p.Pods[0].UID != m.UID {
			continue // another node name, or no longer valid
		}
		best, parsed, data = m, p, d
	}
	if best == nil {
		return
	}
	st.pods, st.objects, st.good, st.data = parsed.Pods, parsed.Objects, true, data
	f.logger.Warn("manifest unusable at start; running the last good pod kept with its state", "file", path,
		"pod", parsed.Pods[0].Name, "uid", parsed.Pods[0].UID, "objects", len(parsed.Objects))
}

// restoreAll, when the manifest path cannot be read before anything was
// listed, keeps the pods the Store kept for every file under it.
func (f *File) restoreAll() {
	if f.sent || f.Store == nil {
		return
	}
	for _, m := range f.Store.Stored(manifest.SourceFile) {
		if m.Origin == f.path || filepath.Dir(m.Origin) == f.path {
			if f.files[m.Origin] == nil {
				f.state(m.Origin, false)
				f.restore(m.Origin)
			}
		}
	}
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
	// Refused by its size, not read: a 50 MiB file costs nothing. A file
	// that grows while it is read is stopped by the limit below.
	if fi.Size() > limit {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	// ReadAtMost fails once it has read limit+1 bytes: the file grew past
	// the limit while it was read.
	data, err := utilio.ReadAtMost(fh, limit+1)
	if errors.Is(err, utilio.ErrLimitReached) {
		return nil, fmt.Errorf("larger than %d bytes", limit)
	}
	if err != nil {
		return nil, err
	}
	return data, nil
}
