//go:build linux && cgo

package oci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// SetLogRotation changes containerLogMaxSize and containerLogMaxFiles (a
// reload): containers started from now on rotate their logs by them, and so
// do the running ones. Each container's state dir gets rotationFile (the
// fixed form the C monitor reads with no parser), which its monitor reads at
// start and on the SIGHUP sent to it here, and the same as JSON,
// legacyRotationFile, which is what a monitor of an older staticpodd still
// running reads; a monitor older still (no RotationReload in its state) keeps
// the rotation it started with. A maxSize of 0 or less turns rotation off.
func (r *Runtime) SetLogRotation(maxSize int64, maxFiles int) error {
	rot := logRotation{MaxSize: maxSize, MaxFiles: maxFiles}
	r.mu.Lock()
	r.cfg.LogMaxSize, r.cfg.LogMaxFiles = maxSize, maxFiles
	r.mu.Unlock()
	entries, err := os.ReadDir(filepath.Join(r.cfg.RunDir, containersDir))
	if err != nil {
		return fmt.Errorf("set log rotation: %w", err)
	}
	var errs []error
	for _, e := range entries {
		id := e.Name()
		if strings.HasSuffix(id, removingSuffix) {
			continue // a state dir being removed: the file would make its removal fail
		}
		if ok, err := r.writeRotation(id, rot); err != nil {
			errs = append(errs, fmt.Errorf("set log rotation of container %s: %w", id, err))
			continue
		} else if !ok {
			continue
		}
		var ms monitorState
		if ok, err := readOptionalJSON(filepath.Join(r.containerDir(id), stateFile), &ms); err != nil || !ok || !ms.RotationReload {
			continue // not started yet (it reads the file at start), or an older monitor
		}
		m, err := r.monitorOf(id)
		if err != nil || m == nil {
			continue // exited: nothing to rotate any more
		}
		m.signal(unix.SIGHUP)
	}
	return errors.Join(errs...)
}

// writeRotation writes rot into container id's state dir, unless the
// container is being removed or gone (false). Under mu, so that a remove
// never races with the file's creation.
func (r *Runtime) writeRotation(id string, rot logRotation) (bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.removing[id] {
		return false, nil
	}
	// A StartContainer that read the rotation before it changed made the dir
	// before: its monitor reads this file as it starts.
	dir := r.containerDir(id)
	if _, err := os.Stat(dir); err != nil {
		return false, nil // removed
	}
	return true, errors.Join(mon.WriteRotation(filepath.Join(dir, rotationFile), rot),
		writeJSON(filepath.Join(dir, legacyRotationFile), rot))
}

// logRotation is what a container starting now rotates its log by.
func (r *Runtime) logRotation() logRotation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return logRotation{MaxSize: r.cfg.LogMaxSize, MaxFiles: r.cfg.LogMaxFiles}
}
