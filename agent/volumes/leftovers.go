package volumes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/staticpodd/staticpodd/agent/poddir"
)

// RemoveLeftovers removes each <root-dir>/pods/<uid> directory whose UID
// keep does not hold: what an earlier daemon left of pods it never finished
// removing. Memory-backed volumes are unmounted first; a directory that still
// has anything mounted at or under it is left as it is and named in the error,
// since removing through a mount would delete what the mount shows. It returns
// the UIDs whose directory it removed.
func RemoveLeftovers(keep map[string]bool, r poddir.Root) ([]string, error) {
	root := r.Pods()
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
		vols, err := memoryVolumes(r, uid)
		if err != nil {
			errs = append(errs, fmt.Errorf("leftover pod directory %s: %w", r.Pod(uid), err))
		}
		for _, v := range vols {
			if err := unmountIfMounted(v); err != nil {
				errs = append(errs, fmt.Errorf("leftover pod directory %s: %w", r.Pod(uid), err))
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
