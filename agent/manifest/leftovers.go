package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// RemoveLeftoverPodDirs removes each <RootDir>/pods/<uid> directory whose UID
// keep does not hold: what an earlier daemon left of pods it never finished
// removing. Memory-backed emptyDirs are unmounted first; a directory that still
// has anything mounted at or under it is left as it is and named in the error,
// since removing through a mount would delete what the mount shows. It returns
// the UIDs whose directory it removed.
func RemoveLeftoverPodDirs(keep map[string]bool, p Paths) ([]string, error) {
	root := filepath.Join(p.RootDir, "pods")
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list pod directories in %s: %w", root, err)
	}
	var stale []string
	for _, e := range entries {
		if e.IsDir() && !keep[e.Name()] {
			stale = append(stale, e.Name())
		}
	}
	if len(stale) == 0 {
		return nil, nil
	}
	var errs []error
	for _, uid := range stale {
		emptyDirs := filepath.Join(p.PodDir(uid), "volumes", "kubernetes.io~empty-dir")
		vols, err := os.ReadDir(emptyDirs)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("leftover pod directory %s: %w", p.PodDir(uid), err))
		}
		for _, v := range vols {
			if err := unmountIfMounted(filepath.Join(emptyDirs, v.Name())); err != nil {
				errs = append(errs, fmt.Errorf("leftover pod directory %s: %w", p.PodDir(uid), err))
			}
		}
	}
	// Mount points are listed by their real path.
	real, err := filepath.EvalSymlinks(root)
	if err != nil {
		return nil, errors.Join(append(errs, fmt.Errorf("resolve %s: %w", root, err))...)
	}
	mounts, err := mountPointsUnder(real)
	if err != nil {
		return nil, errors.Join(append(errs, err)...)
	}
	var removed []string
	for _, uid := range stale {
		dir := filepath.Join(real, uid)
		if i := slices.IndexFunc(mounts, func(m string) bool { return m == dir || strings.HasPrefix(m, dir+"/") }); i >= 0 {
			errs = append(errs, fmt.Errorf("leftover pod directory %s: %s is still a mount point; not removed", dir, mounts[i]))
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, fmt.Errorf("remove leftover pod directory %s: %w", dir, err))
			continue
		}
		removed = append(removed, uid)
	}
	return removed, errors.Join(errs...)
}

// RemoveLeftoverLogs removes each pod log directory,
// <PodLogsDir>/<namespace>_<name>_<uid>, whose UID keep does not hold: what
// an earlier daemon left of a pod whose removal it did not finish (the logs
// go last, after the sandbox and the pod directory, so a daemon killed in
// between left them with nothing else to find them by). The kubelet's
// container GC removes the log directories of pods it no longer has
// (evictPodLogsDirectories) likewise. Entries not named so are left alone.
// It returns the UIDs whose logs it removed.
func RemoveLeftoverLogs(keep map[string]bool, p Paths) ([]string, error) {
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
