//go:build linux && cgo

package sandbox

import (
	"path/filepath"
	"sync"

	"github.com/opencontainers/cgroups"
	"github.com/opencontainers/cgroups/manager"
)

// newCgroupManager is manager.New with the cgroup v1 hierarchies' mount
// points found once per process. For each of its fifteen controllers,
// libcontainer's v1 manager finds where the controller is mounted
// (securejoin, lstat of the directory and its parent, statfs) at every New:
// 17 KB and 350 allocations, and the daemon makes three managers per pod
// (the pod's cgroup made, its container's and its own removed), the heap
// the collector walks during a burst of pod starts. The hierarchies are
// mounted at boot and stay (libcontainer's own mountinfo cache assumes as
// much).
func newCgroupManager(cg *cgroups.Cgroup) (cgroups.Manager, error) {
	// The systemd driver names slices, not paths; a relative path is
	// under the daemon's own cgroup in each hierarchy; the devices
	// controller missing is an error libcontainer gives only when devices
	// are not skipped; cgroup v2 has one hierarchy to find.
	if cg.Systemd || !filepath.IsAbs(cg.Path) || cg.Resources == nil || !cg.Resources.SkipDevices || cgroups.IsCgroup2UnifiedMode() {
		return manager.New(cg)
	}
	roots, err := v1Roots()
	if err != nil {
		return manager.New(cg)
	}
	// Cleaned alone first, as libcontainer does (path.Inner): joined
	// uncleaned, "/a/../../b" would climb out of the hierarchy.
	inner := filepath.Clean(cg.Path)
	paths := make(map[string]string, len(roots))
	for name, root := range roots {
		paths[name] = filepath.Join(root, inner)
	}
	return manager.NewWithPaths(cg, paths)
}

// v1Roots are the root cgroup's directory in each v1 hierarchy, by
// controller (cpu: /sys/fs/cgroup/cpu,cpuacct), as libcontainer finds them.
var v1Roots = sync.OnceValues(func() (map[string]string, error) {
	m, err := manager.New(&cgroups.Cgroup{Path: "/", Resources: &cgroups.Resources{SkipDevices: true}})
	if err != nil {
		return nil, err
	}
	return m.GetPaths(), nil
})
