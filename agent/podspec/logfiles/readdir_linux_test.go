package logfiles

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"syscall"
	"testing"
)

// A listing holds every name even while signals keep arriving at the
// thread reading it: the kernel ends a getdents(2) call at a pending
// signal, and the Go runtime signals its threads to preempt goroutines.
func TestReadDirNamesUnderSignals(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for i := range 300 {
		name := fmt.Sprintf("0.log.20260102-%06d", i)
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o640); err != nil {
			t.Fatal(err)
		}
		want = append(want, name)
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	pid, tid := syscall.Getpid(), syscall.Gettid()
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		for {
			select {
			case <-stop:
				return
			default:
			}
			// The runtime's own preemption signal: it takes spurious ones.
			_ = syscall.Tgkill(pid, tid, syscall.SIGURG)
		}
	}()
	defer func() { close(stop); <-stopped }()
	for range 300 {
		got, err := readDirNames(dir)
		if err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("listed %d of the %d names", len(got), len(want))
		}
	}
}
