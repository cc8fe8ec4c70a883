package oci

import (
	"fmt"

	"golang.org/x/sys/unix"
)

func detectCgroupHost() (CgroupHost, error) {
	var st unix.Statfs_t
	if err := unix.Statfs("/sys/fs/cgroup", &st); err != nil {
		return CgroupHost{}, fmt.Errorf("statfs /sys/fs/cgroup: %w", err)
	}
	return CgroupHost{
		Unified: st.Type == unix.CGROUP2_SUPER_MAGIC,
		Systemd: systemdBooted("/run/systemd/system"),
	}, nil
}
