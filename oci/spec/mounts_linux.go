package spec

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/moby/sys/mountinfo"
)

// hostPropagation finds the host mount that holds source (symlinks
// resolved, as the bind will resolve them) and tells whether it is shared
// or a slave, as containerd's ensureShared and ensureSharedOrSlave do.
func hostPropagation(source string) (shared, slave bool, mountpoint string, err error) {
	path, err := filepath.EvalSymlinks(source)
	if err != nil {
		return false, false, "", err
	}
	mounts, err := mountinfo.GetMounts(nil)
	if err != nil {
		return false, false, "", fmt.Errorf("read mountinfo: %w", err)
	}
	var best *mountinfo.Info
	for _, m := range mounts {
		if path == m.Mountpoint || strings.HasPrefix(path, strings.TrimSuffix(m.Mountpoint, "/")+"/") {
			// The last of equally long mount points is the one on top.
			if best == nil || len(m.Mountpoint) >= len(best.Mountpoint) {
				best = m
			}
		}
	}
	if best == nil {
		return false, false, "", fmt.Errorf("%s: no mount holds it", path)
	}
	for _, opt := range strings.Fields(best.Optional) {
		shared = shared || strings.HasPrefix(opt, "shared:")
		slave = slave || strings.HasPrefix(opt, "master:")
	}
	return shared, slave, best.Mountpoint, nil
}
