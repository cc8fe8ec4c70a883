//go:build linux && cgo && testhooks

package oci

import (
	"os"
	"strings"

	"golang.org/x/sys/unix"

	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

const pauseHooks = true

func init() {
	mon.PauseAt = func(point string) {
		switch os.Getenv(monitorPauseEnv) {
		case point:
			// To this thread: one sent to the process is taken by its
			// first thread, and this one went on (into runc's exec, at
			// PauseExec) until that one stopped it.
			_ = unix.Tgkill(os.Getpid(), unix.Gettid(), unix.SIGSTOP)
		case monitorFailHandOver:
			if point == mon.PauseRun {
				_ = os.Setenv("STATICPODD_TEST_TOO_BIG", strings.Repeat("x", 200<<10))
			}
		}
	}
}
