package oci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// LockFile is the run dir's lock: its holder is the one daemon that may
// adopt, start and remove the containers recorded under the run dir.
const LockFile = "staticpodd.lock"

// lockWait is how long the run dir's lock is waited for when the daemon
// that took it is gone: a forked child's way to its exec, on a busy machine.
const lockWait = 5 * time.Second

// LockRunDir takes <runDir>/staticpodd.lock (flock) for this process and
// writes its pid there, or says which other daemon has it. Take it before
// anything reads the run dir's state: a second daemon on the same dirs would
// adopt, clean up or start the first one's containers. The lock lasts until
// the file is closed or the process exits; the file is close-on-exec, so
// monitors never hold it.
//
// One process may hold it after its daemon died: a child the daemon was
// forking when it was killed (a monitor, a container's init, an exec probe).
// Between clone and exec a child holds a copy of every fd of its parent,
// close-on-exec ones too, and drops those at its exec, a few syscalls later,
// however the parent died. So when the daemon whose pid the file names is
// gone, the lock is waited for, up to lockWait, instead of refused as a live
// daemon's.
func LockRunDir(runDir string) (*os.File, error) {
	path := filepath.Join(runDir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	deadline := time.Now().Add(lockWait)
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) {
			break
		}
		b, _ := os.ReadFile(path)
		pid := strings.TrimSpace(string(b))
		if alive(pid) || time.Now().After(deadline) {
			f.Close()
			if !alive(pid) {
				return nil, fmt.Errorf("another process holds the lock of --run-dir %s, though staticpodd pid %s, which took it, is gone", runDir, pid)
			}
			return nil, fmt.Errorf("another staticpodd (pid %s) runs on --run-dir %s", pid, runDir)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// RunDirHolder returns the pid written in runDir's lock while a process
// holds it: a daemon starting, stopping or stuck when its socket does not
// answer. It takes the lock shared for an instant only, which a daemon
// taking it meanwhile waits out as a dead daemon's forking child's
// (LockRunDir).
func RunDirHolder(runDir string) (pid string, held bool) {
	f, err := os.Open(filepath.Join(runDir, LockFile))
	if err != nil {
		return "", false
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		b, _ := os.ReadFile(f.Name())
		return strings.TrimSpace(string(b)), errors.Is(err, unix.EWOULDBLOCK)
	}
	return "", false
}

// alive reports whether process pid (a decimal string) exists; an empty or
// malformed one does not.
func alive(pid string) bool {
	n, err := strconv.Atoi(pid)
	if err != nil || n <= 0 {
		return false
	}
	err = unix.Kill(n, 0)
	return err == nil || errors.Is(err, unix.EPERM)
}
