package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// SeenStore keeps, for pods that were started, the kubernetes.io/config.seen
// time in <RootDir>/pods/<uid>/seen and the pod's status.startTime (when the
// agent first took it on) in <RootDir>/pods/<uid>/started, so both keep their
// values across daemon restarts. The files are written only once the pod's
// sandbox is made (Record) and go with the pod's directory
// (manifest.RemoveVolumes): a generation that never starts, such as one of
// many quick edits, leaves nothing on disk.
type SeenStore struct {
	paths manifest.Paths
}

func NewSeenStore(paths manifest.Paths) *SeenStore {
	return &SeenStore{paths: paths}
}

// Seen is a manifest.SeenFunc: the recorded time of a pod that was started,
// else the current time. It writes nothing.
func (s *SeenStore) Seen(uid types.UID) time.Time {
	return s.read(string(uid), "seen", time.Now())
}

// Started is the recorded start time of a pod that
// was started, else t. It writes nothing; Record does.
func (s *SeenStore) Started(uid string, t time.Time) time.Time {
	return s.read(uid, "started", t)
}

// read returns the time in the pod's file name, or def when there is none.
func (s *SeenStore) read(uid, name string, def time.Time) time.Time {
	if !manifest.ValidUID(uid) {
		return def // validation refuses the pod; never a path out of the root dir
	}
	if b, err := os.ReadFile(filepath.Join(s.paths.PodDir(uid), name)); err == nil {
		if t, err := time.Parse(time.RFC3339Nano, string(b)); err == nil {
			return t
		}
	}
	return def
}

// Record writes pod's config.seen annotation and its start time to their
// files, each unless it exists. The writes are atomic (rename), so a reader
// never sees half a file.
func (s *SeenStore) Record(pod *v1.Pod, started time.Time) error {
	seen, err := time.Parse(time.RFC3339Nano, pod.Annotations[manifest.AnnotationSeen])
	if err != nil {
		seen = time.Now()
	}
	return errors.Join(s.write(pod.UID, "seen", seen), s.write(pod.UID, "started", started))
}

func (s *SeenStore) write(uid types.UID, name string, t time.Time) error {
	if !manifest.ValidUID(string(uid)) {
		return fmt.Errorf("record %s of pod %q: invalid UID", name, uid)
	}
	file := filepath.Join(s.paths.PodDir(string(uid)), name)
	if _, err := os.Stat(file); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("record %s of pod %s: %w", name, uid, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+name+".*")
	if err != nil {
		return fmt.Errorf("record %s of pod %s: %w", name, uid, err)
	}
	_, err = tmp.WriteString(t.Format(time.RFC3339Nano))
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), file)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("record %s of pod %s: %w", name, uid, err)
	}
	return nil
}
