//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/opencontainers/runc/libcontainer/system"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/oci/sandbox"
)

// Recorded returns the containers recorded under runDir, running or exited,
// as their records say, for the command line while no daemon runs (crictl
// with the kubelet down). Unlike Runtime.List it changes nothing: it adopts
// no monitor, and a container whose monitor is gone without an exit record
// is StateUnknown, its exit left for the next daemon to record.
func Recorded(runDir string) ([]podspec.ContainerStatus, error) {
	dir := filepath.Join(runDir, containersDir)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var out []podspec.ContainerStatus
	var errs []error
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), removingSuffix) {
			continue
		}
		st, err := recordedStatus(filepath.Join(dir, e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // being created or removed
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("container %s: %w", e.Name(), err))
			continue
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, errors.Join(errs...)
}

// recordedStatus is the status of the container whose state dir is dir, from
// its records and whether its monitor lives.
func recordedStatus(dir string) (podspec.ContainerStatus, error) {
	var rec containerRecord
	if err := readJSON(filepath.Join(dir, containerFile), &rec); err != nil {
		return podspec.ContainerStatus{}, err
	}
	st := rec.status()
	var ms monitorState
	if _, err := readOptionalJSON(filepath.Join(dir, stateFile), &ms); err != nil {
		return st, err
	}
	if ms.MonitorPid == 0 {
		ms.MonitorPid, ms.MonitorStart = rec.MonitorPid, rec.MonitorStart
	}
	// The monitor writes the exit before it exits: read it after the look
	// at the monitor, so that a monitor gone meanwhile left its exit.
	alive := monitorAlive(ms)
	var exit exitRecord
	if ok, err := readOptionalJSON(filepath.Join(dir, exitFile), &exit); err != nil {
		return st, err
	} else if ok {
		applyExit(exit, &st, ms)
		addTerminationMessage(&st, rec, dir)
		return st, nil
	}
	switch {
	case alive && ms.Pid > 0:
		st.State, st.Pid, st.StartedAt = podspec.StateRunning, ms.Pid, ms.StartedAt
	case alive:
		st.State = podspec.StateCreated
	default:
		st.Message = "its monitor is gone and its exit is not recorded; the next daemon records it"
	}
	return st, nil
}

// monitorAlive reports whether the monitor ms names runs: the process of
// its pid, started when it was, not a zombie.
func monitorAlive(ms monitorState) bool {
	if ms.MonitorPid <= 0 {
		return false
	}
	stat, err := system.Stat(ms.MonitorPid)
	return err == nil && stat.StartTime == ms.MonitorStart && stat.State != system.Zombie && stat.State != system.Dead
}

// RecordedSandboxes returns the pod sandboxes recorded under runDir, by pod
// UID, with their addresses as recorded; like Recorded it changes nothing.
func RecordedSandboxes(ctx context.Context, runDir string) (map[string]podspec.SandboxStatus, error) {
	sb := sandbox.New(sandbox.Config{RunDir: runDir})
	uids, err := sb.List(ctx)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]podspec.SandboxStatus, len(uids))
	var errs []error
	for _, uid := range uids {
		st, err := sb.Status(ctx, uid)
		if errors.Is(err, podspec.ErrNotExist) {
			continue // removed meanwhile
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out[uid] = st
	}
	return out, errors.Join(errs...)
}
