package oci

import (
	"path"
	"strings"

	"github.com/opencontainers/cgroups/systemd"
)

// cgroupFSPath is where cgroups path p (a pod's or a container's, as
// podCgroupsPath and containerCgroupsPath make them) is in the cgroup file
// system, relative to a hierarchy's root: p itself under cgroupfs; the
// slice's expanded path, and the scope in it, under systemd.
func cgroupFSPath(p string) string {
	if !isSystemdCgroupsPath(p) {
		return p
	}
	slice, scope, _ := strings.Cut(p, ":")
	dir, err := systemd.ExpandSlice(slice)
	if err != nil {
		return p
	}
	if prefix, name, ok := strings.Cut(scope, ":"); ok {
		dir = path.Join(dir, prefix+"-"+name+".scope")
	}
	return dir
}

// rootFSPath is where cgroupRoot's pods are in the cgroup file system under
// driver: cgroupRoot itself under cgroupfs, its slice's path under systemd.
func rootFSPath(driver, cgroupRoot string) string {
	if driver != CgroupDriverSystemd {
		return cgroupRoot
	}
	parts := sliceParts(cgroupRoot)
	if len(parts) == 0 {
		return "/"
	}
	return cgroupFSPath(strings.Join(parts, "-") + ".slice")
}
