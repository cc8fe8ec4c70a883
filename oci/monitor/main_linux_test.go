//go:build linux && cgo

package monitor

import (
	"os"
	"testing"
)

// The tests run the C monitor from this test binary, which then execs it
// again in the monitor's Go roles (the exit recorder, the gzip helper).
func TestMain(m *testing.M) {
	if Reexec() {
		return
	}
	os.Exit(m.Run())
}
