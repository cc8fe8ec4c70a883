package tests

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestDaemonNotDumpable: the daemon, which holds Secrets' values, is not
// dumpable (no core dump; no /proc/<pid>/{mem,environ,fd} but with
// CAP_SYS_PTRACE), and still starts its monitors from the sealed memfd of
// their program, which its children reach through its /proc/<pid>/fd, and
// still debugs a pod, whose target namespace goes the same way.
func TestDaemonNotDumpable(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", sleeper("web", ""))
	d.WaitRunning("web", 30*time.Second)

	monitors := d.Monitors()
	if len(monitors) == 0 {
		t.Fatal("no monitor")
	}
	// A non-dumpable process's /proc/<pid>/environ is refused to root
	// without CAP_SYS_PTRACE, where the kernel enforces it: a helper that
	// makes itself non-dumpable says whether this one does.
	if err := openWithoutPtraceCap(t, fmt.Sprintf("/proc/%d/environ", nonDumpableHelper(t))); !errors.Is(err, unix.EACCES) {
		t.Logf("this kernel lets root without CAP_SYS_PTRACE read a non-dumpable process's environ (%v): the daemon's flag is not seen here", err)
	} else {
		if err := openWithoutPtraceCap(t, fmt.Sprintf("/proc/%d/environ", d.PID())); !errors.Is(err, unix.EACCES) {
			t.Errorf("the daemon's environ opened without CAP_SYS_PTRACE (%v): it is dumpable", err)
		}
		// The monitors, past their exec, are dumpable as ever.
		if err := openWithoutPtraceCap(t, fmt.Sprintf("/proc/%d/environ", monitors[0])); err != nil {
			t.Errorf("a monitor's environ without CAP_SYS_PTRACE: %v", err)
		}
	}
	for _, pid := range monitors {
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err != nil || !strings.HasPrefix(exe, "/memfd:") {
			t.Errorf("monitor %d runs %q (%v), want the monitor's memfd", pid, exe, err)
		}
	}
	if out := d.Output(); strings.Contains(out, "monitors run as this binary") {
		t.Errorf("the daemon fell back from the monitor's memfd:\n%s", out)
	}
	if out, errOut, code := execOut(d, "", "web", "--", "echo", "in"); out != "in\n" || code != 0 {
		t.Errorf("exec: %q %q %d", out, errOut, code)
	}
}

// nonDumpableEnv makes this test binary nonDumpableHelper's process.
const nonDumpableEnv = "STATICPODD_TEST_NON_DUMPABLE"

func init() {
	if os.Getenv(nonDumpableEnv) != "1" {
		return
	}
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		os.Exit(1)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the test ends
	os.Exit(0)
}

// nonDumpableHelper runs this test binary as a non-dumpable process until
// the test ends, and returns its pid.
func nonDumpableHelper(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), nonDumpableEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("non-dumpable helper: %q, %v", line, err)
	}
	return cmd.Process.Pid
}

// openWithoutPtraceCap opens path for reading from a thread whose effective
// capabilities lack CAP_SYS_PTRACE; the thread is thrown away after.
func openWithoutPtraceCap(t *testing.T, path string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		var data [2]unix.CapUserData
		if err := unix.Capget(&hdr, &data[0]); err != nil {
			done <- fmt.Errorf("capget: %w", err)
			return
		}
		data[unix.CAP_SYS_PTRACE/32].Effective &^= 1 << (unix.CAP_SYS_PTRACE % 32)
		if err := unix.Capset(&hdr, &data[0]); err != nil {
			done <- fmt.Errorf("capset: %w", err)
			return
		}
		f, err := os.Open(path)
		if err == nil {
			f.Close()
		}
		done <- err
	}()
	return <-done
}
