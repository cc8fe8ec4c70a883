package tests

import (
	"errors"
	"fmt"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// make demo-clean while the demo's daemon still runs fails at once, says
// which pid holds the run dir and what to do, and removes nothing. The
// test holds the run dir's lock as a running daemon would.
func TestDemoCleanRefusedWhileDemoRuns(t *testing.T) {
	testroot.Require(t)
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	t.Parallel()
	dir := t.TempDir()
	runDir := filepath.Join("/run", "staticpodd-test-demo-"+testdaemon.RandHex(4))
	t.Cleanup(func() { os.RemoveAll(runDir) })
	if err := os.MkdirAll(runDir, 0o700); err != nil {
		t.Fatal(err)
	}
	lock, err := os.OpenFile(filepath.Join(runDir, "staticpodd.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(lock, "%d\n", os.Getpid())
	out := filepath.Join(dir, "out")
	keep := filepath.Join(out, "demo", "root", "keep")
	if err := os.MkdirAll(keep, 0o700); err != nil {
		t.Fatal(err)
	}

	// -o: the binary under test is used as it is, not rebuilt.
	cmd := exec.Command("make", "-C", "..", "-o", testdaemon.Bin, "demo-clean", "BIN="+testdaemon.Bin, "OUT="+out,
		"DEMO_ROOT="+filepath.Join(out, "demo", "root"), "DEMO_RUN="+runDir)
	b, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("make demo-clean: %v, want it to fail\n%s", err, b)
	}
	pid := strconv.Itoa(os.Getpid())
	for _, want := range []string{"another staticpodd (pid " + pid + ")", "the demo daemon still runs (pid " + pid + "): stop it first"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("output lacks %q:\n%s", want, b)
		}
	}
	if _, err := os.Stat(keep); err != nil {
		t.Errorf("demo state removed although the demo daemon runs: %v", err)
	}
}
