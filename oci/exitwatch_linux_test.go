//go:build linux && cgo

package oci

import (
	"os/exec"
	"runtime"
	"testing"
	"time"
)

// Every watched process's exit is reported once, with its pidfd closed, in
// whatever order they exit, one already gone when it is watched among them;
// and the waiting takes one goroutine, not one per process.
func TestOnExitReportsEachExitOnce(t *testing.T) {
	const n = 50
	type watched struct {
		cmd  *exec.Cmd
		done chan struct{}
	}
	var ws []watched
	before := runtime.NumGoroutine()
	for i := range n {
		cmd := exec.Command("sleep", "3600")
		if i == 0 {
			cmd = exec.Command("true")
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		pidfd, err := openPidfd(cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			for !pidfdExited(pidfd) {
				time.Sleep(time.Millisecond)
			}
		}
		w := watched{cmd, make(chan struct{})}
		onExit(pidfd, func() {
			if rc, err := pidfd.SyscallConn(); err == nil && rc.Control(func(uintptr) {}) == nil {
				t.Errorf("process %d: pidfd still open when its exit is reported", cmd.Process.Pid)
			}
			_ = cmd.Wait()
			close(w.done) // a second report panics
		})
		ws = append(ws, w)
	}
	select {
	case <-ws[0].done:
	case <-time.After(time.Minute):
		t.Fatal("the exit of a process gone before it was watched was not reported")
	}
	// Parked goroutines: the watcher (the first use of onExit starts it),
	// none per process.
	if g := runtime.NumGoroutine() - before; g > 1 {
		t.Errorf("%d more goroutines with %d processes watched, want at most 1", g, n-1)
	}
	for i := n - 1; i > 0; i-- { // the reverse order of their start
		select {
		case <-ws[i].done:
			t.Fatalf("process %d reported exited while it runs", ws[i].cmd.Process.Pid)
		default:
		}
		_ = ws[i].cmd.Process.Kill()
		select {
		case <-ws[i].done:
		case <-time.After(time.Minute):
			t.Fatalf("the exit of process %d was not reported", ws[i].cmd.Process.Pid)
		}
	}
}
