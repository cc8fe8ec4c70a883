//go:build linux && cgo

package oci

import "github.com/opencontainers/runc/libcontainer/seccomp"

// BuildFeatures reports what this binary was built with: seccomp as
// libcontainer itself sees it (seccomp.Enabled, set by its build tag), the
// monitor by whether one is embedded.
func BuildFeatures() Features {
	return Features{Seccomp: seccomp.Enabled, EmbeddedMonitor: len(monitorBinary) > 0}
}
