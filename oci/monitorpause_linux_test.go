//go:build linux && cgo

package oci

import "testing"

// monitorPauseEnv names the point (mon.PauseRun, mon.PauseDestroy) where a monitor
// started by this test binary stops itself (SIGSTOP). Monitors re-execute
// the test binary, so an init runs in them before Reexec
// (monitorpause_hooks_linux_test.go).
const monitorPauseEnv = "STATICPODD_TEST_MONITOR_PAUSE"

// monitorFailHandOver, as monitorPauseEnv, makes the monitor's exec into
// the C monitor fail (E2BIG: one environment string past MAX_ARG_STRLEN).
const monitorFailHandOver = "fail-hand-over"

// requirePauseHooks fails a test that stops a monitor at a pause point in a
// build without them: the monitor would not stop, and the test would test
// something else, or hang.
func requirePauseHooks(t *testing.T) {
	t.Helper()
	if !pauseHooks {
		t.Fatal("the monitor's pause points are only in a build with -tags testhooks (make test sets it)")
	}
}
