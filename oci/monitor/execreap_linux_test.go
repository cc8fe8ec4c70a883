//go:build linux && cgo

package monitor

import (
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/opencontainers/runc/libcontainer/system"
	"golang.org/x/sys/unix"
)

// The exec server reaps a child that nothing waits for once it has been a
// zombie a while, and leaves alone one that serveExec waits for: its exit
// code is the exec's.
func TestStrayChildrenAreReapedWaitedOnesLeft(t *testing.T) {
	start := func() *exec.Cmd {
		t.Helper()
		cmd := exec.Command("true")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd
	}
	stray, waited := start(), start()
	// Both exited before the reaper asks for SIGCHLD: it looks at once.
	for _, cmd := range []*exec.Cmd{stray, waited} {
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err == nil {
				break
			}
			if err != unix.EINTR {
				t.Fatal(err)
			}
		}
	}
	r := newStrayReaper(100 * time.Millisecond)
	r.wait(waited.Process.Pid)
	stop := make(chan struct{})
	stopped := make(chan struct{})
	go func() { r.run(stop); close(stopped) }()
	defer func() { close(stop); <-stopped }()
	zombie := func(pid int) bool {
		st, err := system.Stat(pid)
		return err == nil && st.State == system.Zombie
	}
	if !slices.Contains(children(), stray.Process.Pid) {
		t.Fatalf("children() = %v, without %d", children(), stray.Process.Pid)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, err := os.Stat("/proc/" + strconv.Itoa(stray.Process.Pid)); os.IsNotExist(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stray %d not reaped", stray.Process.Pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !zombie(waited.Process.Pid) {
		t.Fatalf("the child serveExec waits for (%d) was reaped under it", waited.Process.Pid)
	}
	if err := waited.Wait(); err != nil {
		t.Fatalf("the waited child's own wait: %v", err)
	}
	r.done(waited.Process.Pid)
	// Without children files, the scan of every process's parent.
	if got := childrenByParent(); slices.Contains(got, waited.Process.Pid) || slices.Contains(got, stray.Process.Pid) {
		t.Errorf("childrenByParent() = %v after both were reaped", got)
	}
	third := start()
	defer third.Wait() // before the reaper stops: it waits for it
	if got := childrenByParent(); !slices.Contains(got, third.Process.Pid) {
		t.Errorf("childrenByParent() = %v, without %d", got, third.Process.Pid)
	}
}

// An exec's process that exits before its start returns (a command that
// exits at once, its start held up: a loaded node) is the exec's, not a
// stray, however long the start takes: serveExec reports its exit code. A
// zombie seen while a start was under way is reaped once that start has
// ended, or once it has been one for strayAfterRun.
func TestStrayReaperLeavesTheProcessOfAStartUnderWay(t *testing.T) {
	exited := func() *exec.Cmd {
		t.Helper()
		cmd := exec.Command("sh", "-c", "exit 7")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var info unix.Siginfo
		for {
			err := unix.Waitid(unix.P_PID, cmd.Process.Pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
			if err == nil {
				return cmd
			}
			if err != unix.EINTR {
				t.Fatal(err)
			}
		}
	}
	gone := func(pid int) bool {
		_, err := os.Stat("/proc/" + strconv.Itoa(pid))
		return os.IsNotExist(err)
	}
	r := newStrayReaper(time.Second)
	run := r.begin() // ctr.Run under way
	own := exited()  // its process, exited already
	stray := exited()
	now := time.Now()
	r.sweep(now)
	later := r.begin() // a start begun after: none of its doing
	r.sweep(now.Add(5 * time.Second))
	if gone(own.Process.Pid) {
		t.Fatalf("the process %d of a start under way was reaped as a stray", own.Process.Pid)
	}
	// The start returns, serveExec waits for its process.
	r.wait(own.Process.Pid)
	r.end(run)
	err := own.Wait()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 7 {
		t.Fatalf("the exec's own wait: %v, want exit status 7", err)
	}
	r.done(own.Process.Pid)
	r.sweep(now.Add(6 * time.Second))
	if !gone(stray.Process.Pid) {
		t.Fatalf("stray %d not reaped once the starts under way when it was seen ended", stray.Process.Pid)
	}
	// A start that never returns holds a zombie seen meanwhile for
	// strayAfterRun only.
	stuck := exited()
	r.sweep(now)
	r.sweep(now.Add(5 * time.Second))
	if gone(stuck.Process.Pid) {
		t.Fatalf("zombie %d reaped while a start begun before it was seen was under way", stuck.Process.Pid)
	}
	r.sweep(now.Add(strayAfterRun))
	if !gone(stuck.Process.Pid) {
		t.Fatalf("zombie %d not reaped after strayAfterRun", stuck.Process.Pid)
	}
	r.end(later)
}
