package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/rollout"
)

// restartsFile, in the root dir, holds the restart markers.
const restartsFile = "restarts.json"

// restarts are the markers of staticpodd restart: by pod full name, the
// time of its last restart (manifest.AnnotationRestartedAt), which
// reconcile mixes into the pod's UID (manifest.Regenerate). They are on disk,
// written with atomicfile, so that a daemon that restarts, or a power cut,
// neither restarts a pod again nor brings back its generation from before
// the restart. A pod name that leaves the pod set (its manifest removed)
// loses its marker: written back, the manifest is the pod it always was.
type restarts struct {
	path string // "" keeps the markers in memory only (no root dir)

	mu sync.Mutex        // guards at and unsaved
	at map[string]string // pod full name -> restartedAt
	// unsaved: the file still holds markers that at has forgotten (a full
	// disk refused the write); the next apply writes it again.
	unsaved bool
}

// loadRestarts reads the markers under rootDir. A file that cannot be read
// is logged and taken as no marker: the pods keep the UIDs of their
// manifests, as before any restart.
func loadRestarts(rootDir string, logger *slog.Logger) *restarts {
	r := &restarts{at: map[string]string{}}
	if rootDir == "" {
		return r
	}
	r.path = filepath.Join(rootDir, restartsFile)
	b, err := atomicfile.Read(r.path, maxRestartsFile)
	if err == nil {
		err = json.Unmarshal(b, &r.at)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		logger.Warn("restart markers unreadable; pods keep their manifests' UIDs", "file", r.path, "err", err)
		r.at = map[string]string{}
	}
	return r
}

// maxRestartsFile bounds the markers read back: a marker per pod, each a
// name and a time, is far less.
const maxRestartsFile = 4 << 20

// saveLocked writes the markers; the caller holds r.mu.
func (r *restarts) saveLocked() error {
	if r.path == "" {
		return nil
	}
	b, err := json.Marshal(r.at)
	if err == nil {
		err = atomicfile.Write(r.path, b)
	}
	if err != nil {
		return fmt.Errorf("save restart markers: %w", err)
	}
	return nil
}

// mark records a restart of pod key now and returns its marker. Nothing is
// changed if it cannot be saved: a restart the disk does not keep would be
// undone by the next daemon restart.
func (r *restarts) mark(key string) (string, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at := time.Now().UTC().Format(time.RFC3339Nano)
	if at == r.at[key] {
		// Two restarts within the clock's resolution are two generations.
		at = time.Now().Add(time.Nanosecond).UTC().Format(time.RFC3339Nano)
	}
	prev, had := r.at[key]
	r.at[key] = at
	if err := r.saveLocked(); err != nil {
		if had {
			r.at[key] = prev
		} else {
			delete(r.at, key)
		}
		return "", err
	}
	r.unsaved = false
	return at, nil
}

// apply makes each pod with a marker the generation its restart made. With
// complete (every source has spoken), the markers of names no longer in
// pods are forgotten.
func (r *restarts) apply(pods map[string]manifest.Pod, complete bool, logger *slog.Logger) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for key, p := range pods {
		if at := r.at[key]; at != "" {
			pods[key] = manifest.Regenerate(p, manifest.RestartSalt(at), map[string]string{manifest.AnnotationRestartedAt: at})
		}
	}
	if !complete {
		return
	}
	forgot := false
	for key := range r.at {
		if _, ok := pods[key]; !ok {
			delete(r.at, key)
			forgot = true
		}
	}
	if forgot || r.unsaved {
		err := r.saveLocked()
		if err != nil && !r.unsaved {
			// In memory they are gone; on disk they stay until a later
			// apply writes the file (each reconcile tries), and come back
			// at a start before that only for a manifest of that name
			// written back meanwhile.
			logger.Warn("forget the restart markers of removed pods", "err", err)
		}
		r.unsaved = err != nil
	}
}

// RestartPod makes a new generation of pod namespace/name from the same
// manifest, as kubectl rollout restart does for a workload: the pod gets a
// new UID and the annotation manifest.AnnotationRestartedAt, its old
// generation stops as for an edit (grace period, preStop hooks) and the new
// one starts. It returns the marker; an error wraps podspec.ErrNotExist when
// no manifest defines that pod.
func (a *Agent) RestartPod(namespace, name string) (string, error) {
	key := namespace + "/" + name
	a.mu.Lock()
	w := a.workers[key]
	known := w != nil && w.desiredUID() != ""
	a.mu.Unlock()
	if !known {
		return "", fmt.Errorf("pod %s: no manifest defines it: %w", key, podspec.ErrNotExist)
	}
	// A restart makes a new UID of what the file offers, which lifts a
	// rejection as an edit does: the generation rolled back would run
	// again, the file unchanged. kubectl rollout restart after an undo
	// restarts the template undone to; here the operator edits the file.
	if rej := a.rollouts.rejected(namespace, name); rej != nil {
		return "", fmt.Errorf("pod %s: %w: rolled back (%s) to generation %s; a restart would run generation %s again: edit its manifest first",
			key, rollout.ErrRolledBack, rej.By, rej.Target, rej.UID)
	}
	at, err := a.restarts.mark(key)
	if err != nil {
		return "", err
	}
	a.logger.Info("pod restarted: a new generation", "pod", key, "restartedAt", at)
	select {
	case a.regenerate <- struct{}{}:
	default: // one pending reconcile stands for any number
	}
	return at, nil
}
