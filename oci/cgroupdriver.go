package oci

import (
	"fmt"
	"os"
)

// The values of the config's cgroupDriver, as the kubelet names them.
const (
	CgroupDriverCgroupfs = "cgroupfs"
	CgroupDriverSystemd  = "systemd"
)

// CgroupHost is what a machine's cgroups are like.
type CgroupHost struct {
	Unified bool // cgroup v2 only (not v1 or hybrid)
	Systemd bool // systemd is the init system and owns the cgroup tree
}

// Driver is the cgroup driver that suits the host: systemd where systemd
// manages the tree, cgroupfs elsewhere.
func (h CgroupHost) Driver() string {
	if h.Systemd {
		return CgroupDriverSystemd
	}
	return CgroupDriverCgroupfs
}

// DetectCgroupDriver says which cgroup driver suits this host, and what the
// host is like.
func DetectCgroupDriver() (string, CgroupHost, error) {
	h, err := detectCgroupHost()
	if err != nil {
		return "", h, err
	}
	return h.Driver(), h, nil
}

// CheckCgroupDriver returns an error, one line naming the field, when driver
// cannot work on this host: systemd where systemd does not run as init. The
// cgroupfs driver works everywhere, also beside systemd (in the unit's
// delegated subtree), as the kubelet allows.
func CheckCgroupDriver(driver string) error {
	_, h, err := DetectCgroupDriver()
	if err != nil {
		return fmt.Errorf("cgroupDriver %q: cannot tell the host's cgroups: %w", driver, err)
	}
	switch driver {
	case CgroupDriverCgroupfs:
		return nil
	case CgroupDriverSystemd:
		if !h.Systemd {
			return fmt.Errorf("cgroupDriver %q does not match this host: systemd is not its init system (no /run/systemd/system); use cgroupfs", driver)
		}
		return nil
	default:
		return fmt.Errorf("cgroupDriver %q: neither %s nor %s", driver, CgroupDriverCgroupfs, CgroupDriverSystemd)
	}
}

// systemdBooted is sd_booted(3): systemd creates this directory as init.
func systemdBooted(dir string) bool {
	fi, err := os.Lstat(dir)
	return err == nil && fi.IsDir()
}
