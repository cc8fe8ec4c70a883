package agent

import (
	"os"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// SeenStore remembers when each pod UID was first seen, in
// <RootDir>/pods/<uid>/seen, so the kubernetes.io/config.seen annotation keeps
// its value across daemon restarts. The file goes with the pod's directory when
// the pod is removed (manifest.RemoveVolumes), so nothing here outlives a pod.
type SeenStore struct {
	paths manifest.Paths
	mu    sync.Mutex // serialises the read-or-create of a file
}

func NewSeenStore(paths manifest.Paths) *SeenStore {
	return &SeenStore{paths: paths}
}

// Seen is a manifest.SeenFunc.
func (s *SeenStore) Seen(uid types.UID) time.Time {
	if !manifest.ValidUID(string(uid)) {
		return time.Now() // validation refuses the pod; never a path out of the root dir
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	file := filepath.Join(s.paths.PodDir(string(uid)), "seen")
	if b, err := os.ReadFile(file); err == nil {
		if t, err := time.Parse(time.RFC3339Nano, string(b)); err == nil {
			return t
		}
	}
	t := time.Now()
	// Best effort: without the file, a restarted daemon says it saw the pod later.
	if os.MkdirAll(filepath.Dir(file), 0o700) == nil {
		os.WriteFile(file, []byte(t.Format(time.RFC3339Nano)), 0o600)
	}
	return t
}
