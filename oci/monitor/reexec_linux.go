//go:build linux && cgo

package monitor

import (
	"os"

	// Registers the device-rules cgroup manager; without it libcontainer refuses
	// to start containers ("cgroup manager is not configured to set device rules").
	_ "github.com/opencontainers/cgroups/devices"
	"github.com/opencontainers/runc/libcontainer"
	// nsenter's C constructor runs before the Go runtime in "init" re-execs.
	_ "github.com/opencontainers/runc/libcontainer/nsenter"
)

// Reexec runs the process roles a monitor's binary is executed in:
// libcontainer's container init ("init") and the monitor's Go roles (its
// start, its exit, its gzip helper; the running one is C and never gets
// here). A main must call it first thing; it returns false for any other
// command line and never returns otherwise.
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
	case StartArg:
		os.Exit(runMonitor(os.Args[2:]))
	case ExitArg:
		os.Exit(runExit(os.Args[2:]))
	case GzipArg:
		os.Exit(runGzip(os.Args[2:]))
	}
	return false
}
