package tests

import (
	"errors"
	"os"
	"testing"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// The harness lives in tests/testdaemon, shared with the other e2e packages
// under tests/.

func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }

type daemon = testdaemon.Daemon

// newDaemon prepares a daemon (not started) with the image imported.
func newDaemon(t *testing.T) *daemon {
	t.Helper()
	return testdaemon.New(t)
}

var errStill = errors.New("still there")

// buildImage builds a busybox image tarball with extra mkimage flags.
func buildImage(t *testing.T, out string, args ...string) {
	t.Helper()
	testdaemon.BuildImage(t, out, args...)
}

func procAlive(pid int) bool { return testdaemon.ProcAlive(pid) }
