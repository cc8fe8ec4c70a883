package oci

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCgroupHostDriver(t *testing.T) {
	for _, tc := range []struct {
		host CgroupHost
		want string
	}{
		{CgroupHost{}, CgroupDriverCgroupfs},
		{CgroupHost{Unified: true}, CgroupDriverCgroupfs},
		{CgroupHost{Systemd: true}, CgroupDriverSystemd},
		{CgroupHost{Unified: true, Systemd: true}, CgroupDriverSystemd},
	} {
		if got := tc.host.Driver(); got != tc.want {
			t.Errorf("%+v.Driver() = %q, want %q", tc.host, got, tc.want)
		}
	}
}

func TestSystemdBooted(t *testing.T) {
	dir := t.TempDir()
	if systemdBooted(filepath.Join(dir, "missing")) {
		t.Error("a missing directory counts as booted")
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if systemdBooted(file) {
		t.Error("a file counts as booted")
	}
	if !systemdBooted(dir) {
		t.Error("a directory does not count as booted")
	}
}

// On this host, whatever it is, cgroupfs works, and systemd works exactly
// when systemd is init.
func TestCheckCgroupDriver(t *testing.T) {
	if err := CheckCgroupDriver(CgroupDriverCgroupfs); err != nil {
		t.Errorf("cgroupfs: %v", err)
	}
	err := CheckCgroupDriver(CgroupDriverSystemd)
	if booted := systemdBooted("/run/systemd/system"); booted != (err == nil) {
		t.Errorf("systemd with /run/systemd/system present=%v: %v", booted, err)
	}
	if err := CheckCgroupDriver("nonsense"); err == nil {
		t.Error("an unknown driver passed")
	}
}
