package chaos

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The idle daemon's count leaves out one handle per live exec server, the
// one the daemon keeps on it until it retires: a second handle on the same
// server is a leak, and counts.
func TestExecServerHandlesLeavesOutOnePerServer(t *testing.T) {
	runDir := t.TempDir()
	// A process with an exec server's command line: cat, named so, blocks
	// opening the FIFO its first argument names.
	work := t.TempDir()
	if err := unix.Mkfifo(filepath.Join(work, "__staticpodd_exec"), 0o600); err != nil {
		t.Fatal(err)
	}
	cat, err := exec.LookPath("cat")
	if err != nil {
		t.Fatal(err)
	}
	cmd := &exec.Cmd{Path: cat, Args: []string{"staticpodd-monitor", "__staticpodd_exec", runDir + "/runc"}, Dir: work}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Its command line is the one set once it ran cat.
	for deadline := time.Now().Add(10 * time.Second); ; {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/cmdline")
		if string(b) == "staticpodd-monitor\x00__staticpodd_exec\x00"+runDir+"/runc\x00" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the fake exec server's command line is %q", b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	var fds []int
	t.Cleanup(func() {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
	})
	base := execServerHandles(os.Getpid(), runDir) // Go's own handle on its child, if it keeps one
	for i := range 2 {
		fd, err := unix.PidfdOpen(cmd.Process.Pid, 0)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
		if got, want := execServerHandles(os.Getpid(), runDir), min(base+i+1, 1); got != want {
			t.Fatalf("with %d more handles on one exec server: %d left out, want %d", i+1, got, want)
		}
	}
}
