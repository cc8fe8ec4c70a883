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
// its value across daemon restarts, and when the agent took it on
// (status.startTime), in <RootDir>/pods/<uid>/started. The files go with the
// pod's directory when the pod is removed (manifest.RemoveVolumes), so
// nothing here outlives a pod.
type SeenStore struct {
	paths manifest.Paths
	mu    sync.Mutex // serialises the read-or-create of a file
}

func NewSeenStore(paths manifest.Paths) *SeenStore {
	return &SeenStore{paths: paths}
}

// Seen is a manifest.SeenFunc.
func (s *SeenStore) Seen(uid types.UID) time.Time {
	return s.readOrWrite(string(uid), "seen", time.Now())
}

// Started is the agent's StartTimes.
func (s *SeenStore) Started(uid string, t time.Time) time.Time {
	return s.readOrWrite(uid, "started", t)
}

// readOrWrite returns the time in the pod's file name, writing t there when
// there is none.
func (s *SeenStore) readOrWrite(uid, name string, t time.Time) time.Time {
	if !manifest.ValidUID(uid) {
		return t // validation refuses the pod; never a path out of the root dir
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	file := filepath.Join(s.paths.PodDir(uid), name)
	if b, err := os.ReadFile(file); err == nil {
		if t, err := time.Parse(time.RFC3339Nano, string(b)); err == nil {
			return t
		}
	}
	// Best effort: without the file, a restarted daemon tells a later time.
	if os.MkdirAll(filepath.Dir(file), 0o700) == nil {
		os.WriteFile(file, []byte(t.Format(time.RFC3339Nano)), 0o600)
	}
	return t
}
