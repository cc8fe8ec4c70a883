//go:build linux && cgo

package oci

import (
	"os"

	"github.com/opencontainers/runc/libcontainer"
	// Registers the device-rules cgroup manager; without it libcontainer refuses
	// to start containers ("cgroup manager is not configured to set device rules").
	_ "github.com/opencontainers/cgroups/devices"
	// nsenter's C constructor runs before the Go runtime in "init" re-execs.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
	// The running monitor's C constructor: in that role the Go runtime never
	// starts (see handOver).
	_ "github.com/staticpodd/staticpodd/oci/monitor"
)

// Reexec runs the process roles this binary is re-executed in: libcontainer's
// container init ("init") and the per-container monitor's Go roles (its
// start, its exit, its gzip helper; the running one is C and never gets here). main must call it
// first thing; it returns false for a normal start and never returns otherwise.
func Reexec() bool {
	if len(os.Args) < 2 {
		return false
	}
	switch os.Args[1] {
	case "init":
		if os.Getenv("_LIBCONTAINER_INITPIPE") == "" {
			return false
		}
		libcontainer.Init() // does not return
	case monitorArg:
		os.Exit(runMonitor(os.Args[2:]))
	case exitArg:
		os.Exit(runExit(os.Args[2:]))
	case gzipArg:
		os.Exit(runGzip(os.Args[2:]))
	}
	return false
}
