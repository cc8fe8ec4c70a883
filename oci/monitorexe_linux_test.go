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
	"github.com/opencontainers/runc/libcontainer/system"

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
// program (an upgrade) gets a memfd of its own, and a recorded pid whose
// start time is not the monitor's is not looked at.
func TestOpenMonitorExecutableReusesMonitors(t *testing.T) {
	testroot.Require(t)
	prog := busyboxProgram(t)
	mfd := sealedProgram(t, prog)
	runDir := t.TempDir()
	st := recordMonitor(t, runDir, "c1", mfd)

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
	st.MonitorStart++ // the pid is another process's now
	if err := writeJSON(filepath.Join(runDir, containersDir, "c1", stateFile), st); err != nil {
		t.Fatal(err)
	}
	if f := adoptedMonitorMemfd(runDir, prog); f != nil {
		f.Close()
		t.Error("took the executable of a process that is not the recorded monitor")
	}
}

// After an upgrade most monitors run the old program: the one that runs
// the new one is still found, as the old memfd is compared once.
func TestOpenMonitorExecutableComparesEachMemfdOnce(t *testing.T) {
	testroot.Require(t)
	prog := busyboxProgram(t)
	old := []byte(prog)
	old[len(old)-1] ^= 0xff // same size, other bytes
	oldFd, newFd := sealedProgram(t, string(old)), sealedProgram(t, prog)
	runDir := t.TempDir()
	for i := range maxAdoptedChecked + 1 {
		recordMonitor(t, runDir, "a"+strconv.Itoa(i), oldFd) // listed first
	}
	recordMonitor(t, runDir, "b", newFd)
	got := adoptedMonitorMemfd(runDir, prog)
	if got == nil {
		t.Fatalf("the monitor of the new program was not found behind %d of the old one", maxAdoptedChecked+1)
	}
	defer got.Close()
	if inode(t, got) != inode(t, newFd) {
		t.Error("took another file than the new program's memfd")
	}
}

// busyboxProgram is busybox-static's bytes: an executable to seal.
func busyboxProgram(t *testing.T) string {
	t.Helper()
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("busybox not installed (apt-get install busybox-static): %v", err)
	}
	b, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// sealedProgram is prog in a sealed memfd, closed with the test.
func sealedProgram(t *testing.T, prog string) *os.File {
	t.Helper()
	f, err := newMonitorMemfd(prog)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// recordMonitor starts a "monitor" from exe (busybox's sleep) and records
// it under runDir as container id's, as a monitor records itself.
func recordMonitor(t *testing.T, runDir, id string, exe *os.File) monitorState {
	t.Helper()
	cmd := exec.Command(fdPath(exe))
	cmd.Args = []string{"sleep", "60"}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	stat, err := system.Stat(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(runDir, containersDir, id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	st := monitorState{MonitorPid: cmd.Process.Pid, MonitorStart: stat.StartTime}
	if err := writeJSON(filepath.Join(dir, stateFile), st); err != nil {
		t.Fatal(err)
	}
	return st
}

func inode(t *testing.T, f *os.File) uint64 {
	t.Helper()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st.Sys().(*syscall.Stat_t).Ino
}
