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

// SeenStore keeps the kubernetes.io/config.seen time of pods that were started,
// in <RootDir>/pods/<uid>/seen, so the annotation keeps its value across daemon
// restarts. The file is written only once the pod's sandbox is made (Record) and
// goes with the pod's directory (manifest.RemoveVolumes): a generation that never
// starts, such as one of many quick edits, leaves nothing on disk.
type SeenStore struct {
	paths manifest.Paths
}

func NewSeenStore(paths manifest.Paths) *SeenStore {
	return &SeenStore{paths: paths}
}

func (s *SeenStore) file(uid types.UID) string {
	return filepath.Join(s.paths.PodDir(string(uid)), "seen")
}

// Seen is a manifest.SeenFunc: the recorded time of a pod that was started,
// else the current time. It writes nothing.
func (s *SeenStore) Seen(uid types.UID) time.Time {
	if !manifest.ValidUID(string(uid)) {
		return time.Now() // validation refuses the pod; never a path out of the root dir
	}
	if b, err := os.ReadFile(s.file(uid)); err == nil {
		if t, err := time.Parse(time.RFC3339Nano, string(b)); err == nil {
			return t
		}
	}
	return time.Now()
}

// Record writes pod's config.seen annotation to its seen file unless the file
// exists. The write is atomic (rename), so Seen never reads half a file.
func (s *SeenStore) Record(pod *v1.Pod) error {
	file := s.file(pod.UID)
	if _, err := os.Stat(file); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	t, err := time.Parse(time.RFC3339Nano, pod.Annotations[manifest.AnnotationSeen])
	if err != nil {
		t = time.Now()
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("record config.seen of pod %s: %w", pod.UID, err)
	}
	tmp, err := os.CreateTemp(filepath.Dir(file), ".seen.*")
	if err != nil {
		return fmt.Errorf("record config.seen of pod %s: %w", pod.UID, err)
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
		return fmt.Errorf("record config.seen of pod %s: %w", pod.UID, err)
	}
	return nil
}
