//go:build linux && cgo

// Command staticpodd-monitor is the program a container's monitor and its
// init run as: libcontainer's "init" and the monitor's roles (package
// monitor), and nothing of the daemon. It is not installed on its own: the
// build embeds it in staticpodd (see oci.openMonitorExecutable), which runs it
// from a sealed memfd, so that these processes, one to three per container
// start, pay for the Go runtime and package inits of a few MB instead of the
// whole daemon's.
package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/staticpodd/staticpodd/oci/monitor"
)

// The main goroutine keeps the main thread, as in staticpodd.
func init() { runtime.LockOSThread() }

func main() {
	if monitor.Reexec() {
		return
	}
	fmt.Fprintln(os.Stderr, "staticpodd-monitor: run by staticpodd only")
	os.Exit(2)
}
