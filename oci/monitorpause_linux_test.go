//go:build linux && cgo

package oci

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"

	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// monitorPauseEnv names the point (mon.PauseRun, mon.PauseDestroy) where a monitor
// started by this test binary stops itself (SIGSTOP). Monitors re-execute
// the test binary, so this init runs in them before Reexec.
const monitorPauseEnv = "STATICPODD_TEST_MONITOR_PAUSE"

// monitorFailHandOver, as monitorPauseEnv, makes the monitor's exec into
// the C monitor fail (E2BIG: one environment string past MAX_ARG_STRLEN).
const monitorFailHandOver = "fail-hand-over"

func init() {
	mon.PauseAt = func(point string) {
		switch os.Getenv(monitorPauseEnv) {
		case point:
			_ = unix.Kill(os.Getpid(), unix.SIGSTOP)
		case monitorFailHandOver:
			if point == mon.PauseRun {
				_ = os.Setenv("STATICPODD_TEST_TOO_BIG", strings.Repeat("x", 200<<10))
			}
		}
	}
}
