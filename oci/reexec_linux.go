//go:build linux && cgo

package oci

import mon "github.com/staticpodd/staticpodd/oci/monitor"

// Reexec runs the roles this binary is re-executed in when it is its own
// monitor (see monitorExecutable): libcontainer's container init and the
// monitor's Go roles (package monitor). main must call it first thing; it
// returns false for a normal start and never returns otherwise.
func Reexec() bool { return mon.Reexec() }
