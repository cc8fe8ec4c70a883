//go:build linux && cgo

package oci

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/opencontainers/runc/libcontainer/exeseal"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// fakeMonitor is a program that answers the probe as oci/monitor/exe does.
const fakeMonitor = "#!/bin/sh\necho 'staticpodd-monitor: run by staticpodd only' >&2\nexit 2\n"

// The embedded program runs from a sealed memfd through the daemon's own
// descriptor; one that does not run (here: not a program) leaves monitors
// on this binary, with the reason, instead of failing every start.
func TestOpenMonitorExecutable(t *testing.T) {
	testroot.Require(t)
	path, f, err := openMonitorExecutable(t.TempDir(), fakeMonitor)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if !exeseal.IsCloned(f) {
		t.Error("the monitor's memfd is not sealed")
	}
	if want := "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/"; !strings.HasPrefix(path, want) {
		t.Errorf("monitors start from %q, want the daemon's descriptor %s<n>", path, want)
	}
	if _, err := f.Write([]byte("x")); err == nil {
		t.Error("the sealed memfd took a write")
	}

	path, f, err = openMonitorExecutable(t.TempDir(), "not a program")
	if err == nil || path != selfExe || f != nil {
		t.Errorf("a program that does not run: %q, %v, %v; want %s and the reason", path, f, err, selfExe)
	}

	path, f, err = openMonitorExecutable(t.TempDir(), "")
	if err != nil || path != selfExe || f != nil {
		t.Errorf("no embedded program: %q, %v, %v; want %s", path, f, err, selfExe)
	}
}

// A restarted daemon takes the memfd its running monitors execute when it
// holds the same program, rather than pinning another copy; a different
// program (an upgrade) gets a memfd of its own.
func TestOpenMonitorExecutableReusesMonitors(t *testing.T) {
	testroot.Require(t)
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("busybox not installed (apt-get install busybox-static): %v", err)
	}
	b, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	prog := string(b)
	mfd, err := newMonitorMemfd(prog)
	if err != nil {
		t.Fatal(err)
	}
	defer mfd.Close()
	// A "monitor" running from that memfd, recorded as one.
	cmd := exec.Command("/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(mfd.Fd())))
	cmd.Args = []string{"sleep", "60"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	runDir := t.TempDir()
	dir := filepath.Join(runDir, containersDir, "c1")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(filepath.Join(dir, stateFile), monitorState{MonitorPid: cmd.Process.Pid}); err != nil {
		t.Fatal(err)
	}

	got := adoptedMonitorMemfd(runDir, prog)
	if got == nil {
		t.Fatal("the running monitor's memfd, holding the same program, was not taken")
	}
	defer got.Close()
	if inode(t, got) != inode(t, mfd) {
		t.Error("took another file than the monitor's memfd")
	}
	if other := adoptedMonitorMemfd(runDir, prog+"x"); other != nil {
		other.Close()
		t.Error("took the memfd of another program")
	}
}

func inode(t *testing.T, f *os.File) uint64 {
	t.Helper()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}
