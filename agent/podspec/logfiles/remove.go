package logfiles

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// RemovePodLogs deletes a pod's log directories, <podLogsDir>/<ns>_<name>_<uid>,
// as the kubelet does once a removed pod's containers are gone.
func RemovePodLogs(podLogsDir, podUID string) error {
	if podLogsDir == "" || podUID == "" {
		return nil
	}
	// Names read and split, not globbed: a node removing all its pods
	// matched every pod's directory against a pattern for each. O_DIRECTORY:
	// what is not a directory (a FIFO put in its place would block the open)
	// holds no logs, as Glob took it.
	fd, err := syscall.Open(podLogsDir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ENOTDIR) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("remove logs of pod %s: open %s: %w", podUID, podLogsDir, err)
	}
	d := os.NewFile(uintptr(fd), podLogsDir)
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("remove logs of pod %s: %w", podUID, err)
	}
	for _, name := range names {
		// <ns>_<name>_<uid>: a namespace and a pod name have no "_", a UID
		// may (a manifest's own metadata.uid), so the UID is all after the
		// second: pod u1 does not take the logs of pod x_u1.
		if parts := strings.SplitN(name, "_", 3); len(parts) != 3 || parts[2] != podUID {
			continue
		}
		if err := os.RemoveAll(filepath.Join(podLogsDir, name)); err != nil {
			return fmt.Errorf("remove logs of pod %s: %w", podUID, err)
		}
	}
	return nil
}

// PruneRuns deletes the files of the runs before keepFrom from a container's
// log directory dir, as the kubelet's container garbage collection keeps only
// the current run and the one before it (for logs --previous). A run's files
// are its <attempt>.log and the files rotation made of it (LogAttempt), as the
// kubelet's containerLogManager.Clean removes them together. A directory that
// does not exist has nothing to prune.
func PruneRuns(dir string, keepFrom int) error {
	// Opened beneath podLogsDir through no symlink, and the files removed
	// in it by name: a container that mounts podLogsDir may have swapped
	// its directory for a symlink to a host directory.
	d, err := OpenContainerDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		n, ok := LogAttempt(name)
		if !ok || n >= keepFrom {
			continue
		}
		if err := removeIn(d, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", filepath.Join(dir, name), err))
		}
	}
	return errors.Join(errs...)
}

// RemoveLeftoverPodLogs removes each pod log directory,
// <podLogsDir>/<namespace>_<name>_<uid>, whose UID keep does not hold: what
// an earlier daemon left of a pod whose removal it did not finish (the logs
// go last, after the sandbox and the pod directory, so a daemon killed in
// between left them with nothing else to find them by). The kubelet's
// container GC removes the log directories of pods it no longer has
// (evictPodLogsDirectories) likewise. Entries not named so are left alone.
// It returns the UIDs whose logs it removed.
func RemoveLeftoverPodLogs(podLogsDir string, keep map[string]bool) ([]string, error) {
	if podLogsDir == "" {
		return nil, nil
	}
	entries, err := os.ReadDir(podLogsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list pod log directories in %s: %w", podLogsDir, err)
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		parts := strings.Split(e.Name(), "_")
		if !e.IsDir() || len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" || keep[parts[2]] {
			continue
		}
		dir := filepath.Join(podLogsDir, e.Name())
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove leftover pod log directory %s: %w", dir, err))
			continue
		}
		removed = append(removed, parts[2])
	}
	return removed, errors.Join(errs...)
}
