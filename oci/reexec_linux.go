//go:build linux && cgo

package oci

import mon "github.com/staticpodd/staticpodd/oci/monitor"

// Reexec runs the roles this binary is re-executed in: libcontainer's
// container init, for every exec into a container (the daemon runs those
// itself), and for every start as well as the monitor's Go roles (package
// monitor) when monitors run as this binary (see openMonitorExecutable).
// main must call it first thing; it returns false for a normal start and
// never returns otherwise.
func Reexec() bool { return mon.Reexec() }
