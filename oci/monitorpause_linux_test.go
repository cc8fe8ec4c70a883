//go:build linux && cgo

package oci

import (
	"os"

	"golang.org/x/sys/unix"
)

// monitorPauseEnv names the point (pauseRun, pauseDestroy) where a monitor
// started by this test binary stops itself (SIGSTOP). Monitors re-execute
// the test binary, so this init runs in them before Reexec.
const monitorPauseEnv = "STATICPODD_TEST_MONITOR_PAUSE"

func init() {
	pauseAt = func(point string) {
		if os.Getenv(monitorPauseEnv) == point {
			_ = unix.Kill(os.Getpid(), unix.SIGSTOP)
		}
	}
}
