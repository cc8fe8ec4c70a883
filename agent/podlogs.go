package agent

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

// removePodLogs deletes the pod's log directory, <PodLogsDir>/<ns>_<name>_<uid>, as
// the kubelet does once a removed pod's containers are gone.
func removePodLogs(podUID string, p manifest.Paths) error {
	if p.PodLogsDir == "" || podUID == "" {
		return nil
	}
	dirs, err := filepath.Glob(filepath.Join(p.PodLogsDir, "*_"+podUID))
	if err != nil {
		return fmt.Errorf("remove logs of pod %s: %w", podUID, err)
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("remove logs of pod %s: %w", podUID, err)
		}
	}
	return nil
}

// pruneLogs deletes the log files of container runs before keepFrom, as the
// kubelet's container garbage collection keeps only the current run and the one
// before it (for logs --previous). A run's files are its <attempt>.log and
// the files rotation made of it, as the kubelet's containerLogManager.Clean
// removes them together.
func pruneLogs(pod *v1.Pod, container string, keepFrom int, p manifest.Paths) error {
	if p.PodLogsDir == "" {
		return nil
	}
	dir := filepath.Join(p.LogDir(pod), container)
	// Opened beneath podLogsDir through no symlink, and the files removed
	// in it by name: a container that mounts podLogsDir may have swapped
	// its directory for a symlink to a host directory.
	d, err := logfiles.OpenContainerDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("prune logs of container %s of pod %s: %w", container, pod.Name, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("prune logs of container %s of pod %s: %w", container, pod.Name, err)
	}
	var errs []error
	for _, name := range names {
		n, ok := logfiles.LogAttempt(name)
		if !ok || n >= keepFrom {
			continue
		}
		if err := unix.Unlinkat(int(d.Fd()), name, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", filepath.Join(dir, name), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("prune logs of container %s of pod %s: %w", container, pod.Name, err)
	}
	return nil
}

// removeLeftoverLogs removes each pod log directory,
// <PodLogsDir>/<namespace>_<name>_<uid>, whose UID keep does not hold: what
// an earlier daemon left of a pod whose removal it did not finish (the logs
// go last, after the sandbox and the pod directory, so a daemon killed in
// between left them with nothing else to find them by). The kubelet's
// container GC removes the log directories of pods it no longer has
// (evictPodLogsDirectories) likewise. Entries not named so are left alone.
// It returns the UIDs whose logs it removed.
func removeLeftoverLogs(keep map[string]bool, p manifest.Paths) ([]string, error) {
	if p.PodLogsDir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(p.PodLogsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list pod log directories in %s: %w", p.PodLogsDir, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		parts := strings.Split(e.Name(), "_")
		if !e.IsDir() || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" || keep[parts[2]] {
			continue
		}
		dir := filepath.Join(p.PodLogsDir, e.Name())
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove leftover pod log directory %s: %w", dir, err))
			continue
		}
		removed = append(removed, parts[2])
	}
	return removed, errors.Join(errs...)
}
