//go:build linux && cgo

package oci

import (
	"context"
	"os/exec"
	"runtime"
	"sync/atomic"
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

// afterExit calls each function once, when the monitor's process exits or
// the function's context ends, whichever is first; it holds no goroutine per
// function while the process runs; and one asked for after the exit is
// called at once.
func TestAfterExitCallsEachOnceWithoutAGoroutinePerWait(t *testing.T) {
	cmd := exec.Command("sleep", "3600")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill() }()
	pidfd, err := openPidfd(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	m := newMonitor(cmd.Process.Pid, 0, pidfd)
	onExit(pidfd, func() {
		_ = cmd.Wait()
		m.markExited()
	})

	const n = 100
	var calls [n]atomic.Int32
	called := make(chan int, 2*n)
	ctxs := make([]context.CancelFunc, n)
	before := runtime.NumGoroutine()
	for i := range n {
		ctx, cancel := context.WithCancel(context.Background())
		ctxs[i] = cancel
		m.afterExit(ctx, func() {
			calls[i].Add(1)
			called <- i
		})
	}
	if g := runtime.NumGoroutine() - before; g > 0 {
		t.Errorf("%d more goroutines with %d waits on a running process, want none", g, n)
	}
	// The first ten end by their context, the process still running.
	for i := range 10 {
		ctxs[i]()
		select {
		case j := <-called:
			if j != i {
				t.Fatalf("cancelling wait %d called wait %d", i, j)
			}
		case <-time.After(time.Minute):
			t.Fatalf("wait %d not called when its context ended", i)
		}
	}
	for i := range n {
		if c := calls[i].Load(); i >= 10 && c != 0 {
			t.Fatalf("wait %d called %d times while the process runs", i, c)
		}
	}

	_ = cmd.Process.Kill()
	for range n - 10 {
		select {
		case <-called:
		case <-time.After(time.Minute):
			t.Fatal("not every wait was called at the exit")
		}
	}
	<-m.done
	// A late context end calls nothing again.
	for _, cancel := range ctxs {
		cancel()
	}
	late := make(chan struct{})
	m.afterExit(context.Background(), func() { close(late) })
	select {
	case <-late:
	case <-time.After(time.Minute):
		t.Fatal("a wait asked for after the exit was not called")
	}
	for i := range n {
		if c := calls[i].Load(); c != 1 {
			t.Errorf("wait %d called %d times, want once", i, c)
		}
	}
	if m.waiters != nil {
		t.Errorf("%d waits still held after the exit", len(m.waiters))
	}
}
