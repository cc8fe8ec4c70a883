package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
	"github.com/staticpodd/staticpodd/agent/source"
)

// SeenStore keeps, with the state of each pod that was started, in
// <RootDir>/pods/<uid>/:
//   - seen, the kubernetes.io/config.seen time, so the annotation keeps its
//     value across daemon restarts;
//   - started, the pod's status.startTime (when the agent first took it
//     on), likewise;
//   - manifest.json, the manifest the pod was made from, so that a source
//     whose manifest is invalid when the daemon starts runs that pod again
//     (its last good pod) instead of stopping it (source.Store).
//
// All are written only once the pod's sandbox is made (Record) and go with
// the pod's directory (volumes.Remove): a generation that never
// starts, such as one of many quick edits, leaves nothing on disk.
type SeenStore struct {
	paths manifest.Paths

	mu      sync.Mutex                               // guards offered
	offered map[string]map[types.UID]source.Manifest // by source, the manifests of its pod set
}

var _ source.Store = (*SeenStore)(nil)

func NewSeenStore(paths manifest.Paths) *SeenStore {
	return &SeenStore{paths: paths, offered: map[string]map[types.UID]source.Manifest{}}
}

// manifestFile is where a started pod's manifest is kept.
func (s *SeenStore) manifestFile(uid types.UID) string {
	return poddir.Root(s.paths.RootDir).Manifest(string(uid))
}

// stored is manifest.json: the manifest a pod was made from and where it came from.
type stored struct {
	Source   string `json:"source"`
	Origin   string `json:"origin"`
	Manifest []byte `json:"manifest"`
	// UID is the UID the manifest gives its pod, when the pod has another
	// (manifest.Regenerate: a restart, restart-on-change files).
	UID types.UID `json:"uid,omitempty"`
}

// Offer is source.Store's: the manifests of source's pod set, replacing
// what it offered before. A pod of the set that has started already (it has
// a seen file) and has no manifest.json yet gets one now: it was started
// by a daemon that did not keep them, or before its source offered it.
func (s *SeenStore) Offer(src string, set []source.Manifest) {
	byUID := make(map[types.UID]source.Manifest, len(set))
	for _, m := range set {
		byUID[m.UID] = m
	}
	s.mu.Lock()
	s.offered[src] = byUID
	s.mu.Unlock()
	for uid, m := range byUID {
		if !manifest.ValidUID(string(uid)) {
			continue
		}
		if _, err := os.Stat(s.file(uid)); err != nil {
			continue // not started
		}
		// Best effort, as for seen: without it a restart while the manifest
		// is invalid stops the pod, as the kubelet would.
		_ = s.keepManifest(uid, m)
	}
}

// Stored is source.Store's: the manifests kept for src's started pods.
func (s *SeenStore) Stored(src string) []source.Manifest {
	dirs, err := os.ReadDir(poddir.Root(s.paths.RootDir).Pods())
	if err != nil {
		return nil
	}
	var out []source.Manifest
	for _, d := range dirs {
		uid := types.UID(d.Name())
		if !d.IsDir() || !manifest.ValidUID(string(uid)) {
			continue
		}
		m, ok := s.stored(uid)
		if !ok || m.Source != src {
			continue
		}
		// The manifest's own UID: parsed again, the manifest gives that one,
		// and the agent makes the pod's again from it.
		seen := s.Seen(uid)
		if m.UID != "" {
			uid = m.UID
		}
		out = append(out, source.Manifest{UID: uid, Source: m.Source, Origin: m.Origin, Data: m.Manifest, Seen: seen})
	}
	return out
}

// stored reads the manifest.json of pod uid, a valid UID.
func (s *SeenStore) stored(uid types.UID) (stored, bool) {
	var m stored
	b, err := os.ReadFile(s.manifestFile(uid))
	return m, err == nil && json.Unmarshal(b, &m) == nil
}

// ManifestUID is the UID that the manifest kept for pod uid gives its pod
// (manifest.ManifestUID), "" when none is kept.
func (s *SeenStore) ManifestUID(uid string) string {
	if !manifest.ValidUID(uid) {
		return "" // never a path out of the root dir
	}
	m, ok := s.stored(types.UID(uid))
	switch {
	case !ok:
		return ""
	case m.UID != "":
		return string(m.UID)
	}
	return uid
}

// keepManifest writes m as the manifest.json of pod uid unless it exists,
// atomically, into the pod's directory, which it never makes: Offer runs
// beside the pod's worker, whose teardown may have removed the directory
// since Offer found the pod's seen file, and a manifest.json written after
// it would be left for ever.
func (s *SeenStore) keepManifest(uid types.UID, m source.Manifest) error {
	f, ok, err := s.manifestRecord(uid, m)
	if err == nil && ok {
		err = atomicfile.Write(s.manifestFile(uid), f.Data)
	}
	if err != nil {
		return fmt.Errorf("keep the manifest of pod %s: %w", uid, err)
	}
	return nil
}

// manifestRecord is manifest.json of pod uid, made from m, unless the pod
// has one already (ok false).
func (s *SeenStore) manifestRecord(uid types.UID, m source.Manifest) (f atomicfile.File, ok bool, err error) {
	if _, err := os.Stat(s.manifestFile(uid)); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return f, false, err
	}
	st := stored{Source: m.Source, Origin: m.Origin, Manifest: m.Data}
	if m.UID != uid {
		st.UID = m.UID
	}
	b, err := json.Marshal(st)
	if err != nil {
		return f, false, err
	}
	return atomicfile.File{Name: filepath.Base(s.manifestFile(uid)), Data: b}, true, nil
}

func (s *SeenStore) file(uid types.UID) string {
	return poddir.Root(s.paths.RootDir).Seen(string(uid))
}

// Seen is a manifest.SeenFunc: the recorded time of a pod that was started,
// else the current time. It writes nothing.
func (s *SeenStore) Seen(uid types.UID) time.Time {
	return s.read(string(uid), poddir.Root.Seen, time.Now())
}

// Started is the recorded start time of a pod that was started, else t. It
// writes nothing; Record does.
func (s *SeenStore) Started(uid string, t time.Time) time.Time {
	return s.read(uid, poddir.Root.Started, t)
}

// read returns the time in the pod's file (poddir.Root.Seen or Started), or
// def when there is none.
func (s *SeenStore) read(uid string, file func(poddir.Root, string) string, def time.Time) time.Time {
	if !manifest.ValidUID(uid) {
		return def // validation refuses the pod; never a path out of the root dir
	}
	if b, err := os.ReadFile(file(poddir.Root(s.paths.RootDir), uid)); err == nil {
		if t, err := time.Parse(time.RFC3339Nano, string(b)); err == nil {
			return t
		}
	}
	return def
}

// Record writes pod's config.seen annotation and its start time to their
// files, each unless it exists, and the manifest its source offered for it
// to manifest.json, unless it has one. The writes are atomic and durable,
// together, with the names of pods/<uid> and pods/ (atomicfile.MkdirWriteFiles:
// they wait on the disk about twice, not once a file, once its directory and
// once the directory's parent), so Seen, Started and Stored never read half
// a file, even after a power cut; when they cannot be written together, each
// is written alone, so that one that cannot be (a file size limit, say)
// keeps none of the others from being written, until an fsync fails: that
// is returned, and nothing is written again.
func (s *SeenStore) Record(pod *v1.Pod, started time.Time) error {
	return s.prepareRecord(pod, started)()
}

// RecordAsync is Record in a goroutine of its own, with failed called with
// its error, if any; the channel is closed once it is done. What it needs of
// pod is taken before it returns: the caller may change pod at once.
func (s *SeenStore) RecordAsync(pod *v1.Pod, started time.Time, failed func(error)) <-chan struct{} {
	write := s.prepareRecord(pod, started)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := write(); err != nil {
			failed(err)
		}
	}()
	return done
}

// prepareRecord takes what Record needs of pod and the manifest offered for
// it, and returns the writes.
func (s *SeenStore) prepareRecord(pod *v1.Pod, started time.Time) func() error {
	uid := pod.UID
	if !manifest.ValidUID(string(uid)) {
		return func() error { return fmt.Errorf("record pod %q: invalid UID", uid) }
	}
	s.mu.Lock()
	var offered *source.Manifest
	for _, set := range s.offered {
		if m, ok := set[types.UID(manifest.ManifestUID(pod))]; ok {
			offered = &m
		}
	}
	s.mu.Unlock()
	seen, err := time.Parse(time.RFC3339Nano, pod.Annotations[manifest.AnnotationSeen])
	if err != nil {
		seen = time.Now()
	}
	return func() error { return s.record(uid, offered, seen, started) }
}

// record is Record's writes, for pod uid (a valid UID), seen at seen.
func (s *SeenStore) record(podUID types.UID, offered *source.Manifest, seen, started time.Time) error {
	var errs []error
	// Each record that is missing, with what its write's error says.
	type record struct {
		atomicfile.File
		what string
	}
	var recs []record
	if offered != nil {
		if f, ok, err := s.manifestRecord(podUID, *offered); err != nil {
			errs = append(errs, fmt.Errorf("keep the manifest of pod %s: %w", podUID, err))
		} else if ok {
			recs = append(recs, record{f, "keep the manifest of pod " + string(podUID)})
		}
	}
	root, uid := poddir.Root(s.paths.RootDir), string(podUID)
	for _, r := range []struct {
		name, file string
		t          time.Time
	}{{"seen", root.Seen(uid), seen}, {"started", root.Started(uid), started}} {
		if _, err := os.Stat(r.file); err == nil || !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			continue
		}
		recs = append(recs, record{atomicfile.File{Name: filepath.Base(r.file), Data: []byte(r.t.Format(time.RFC3339Nano))},
			fmt.Sprintf("record %s of pod %s", r.name, uid)})
	}
	if len(recs) == 0 {
		return errors.Join(errs...)
	}
	dir := root.Pod(uid)
	files := make([]atomicfile.File, len(recs))
	for i, r := range recs {
		files[i] = r.File
	}
	err := atomicfile.MkdirWriteFiles(s.paths.RootDir, dir, 0o700, files)
	var syncErr *atomicfile.SyncError
	switch {
	case err == nil:
	case errors.As(err, &syncErr):
		// An fsync failed: what it was for may not be on disk, and the
		// same pages written again would prove nothing. Whatever of them
		// was renamed stays, for a restart of the daemon to find; the
		// error names them all, as any may not survive a power cut.
		names := make([]string, len(recs))
		for i, r := range recs {
			names[i] = r.Name
		}
		errs = append(errs, fmt.Errorf("record %s of pod %s: %w", strings.Join(names, ", "), uid, err))
	default:
		// One by one, as before they were written together: one that
		// cannot be written (a full disk, a file size limit) keeps none
		// of the others from being written; until an fsync fails.
		for _, r := range recs {
			if _, serr := os.Stat(filepath.Join(dir, r.Name)); serr == nil {
				continue // renamed before the error; its directory fsynced, or that failed as a SyncError
			}
			if err := writeRecord(filepath.Join(dir, r.Name), r.Data); err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", r.what, err))
				if errors.As(err, &syncErr) {
					break
				}
			}
		}
	}
	return errors.Join(errs...)
}

// writeRecord writes data to file, its directory made if missing, with
// atomicfile: the pod is restored from these files after a crash or a power
// cut, so a record that was written is on disk, whole.
func writeRecord(file string, data []byte) error {
	if err := atomicfile.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(file, data)
}
