package oci

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// holdLock flocks dir's lock file through an open file description of its
// own, with pid in the file, as a daemon (or a child it was forking) holds it.
func holdLock(t *testing.T, dir string, pid int) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "staticpodd.lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	f.Truncate(0)
	f.WriteAt([]byte(strconv.Itoa(pid)+"\n"), 0)
	return f
}

// deadPID is the pid of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	return cmd.Process.Pid
}

func TestLockRunDirRefusedWhileItsDaemonRuns(t *testing.T) {
	dir := t.TempDir()
	held := holdLock(t, dir, os.Getpid())
	defer held.Close()
	began := time.Now()
	_, err := LockRunDir(dir)
	if err == nil || !strings.Contains(err.Error(), "another staticpodd (pid "+strconv.Itoa(os.Getpid())+") runs") {
		t.Fatalf("LockRunDir = %v, want another staticpodd named", err)
	}
	if d := time.Since(began); d > time.Second {
		t.Errorf("refused after %v: a live daemon's lock is not waited for", d)
	}
}

// The daemon that took the lock is dead, but a child it was forking when it
// was killed holds the lock until its exec: the next daemon waits for it.
func TestLockRunDirWaitsForTheForkOfADeadDaemon(t *testing.T) {
	dir := t.TempDir()
	held := holdLock(t, dir, deadPID(t))
	time.AfterFunc(300*time.Millisecond, func() { held.Close() })
	f, err := LockRunDir(dir)
	if err != nil {
		t.Fatalf("LockRunDir = %v, want the lock once the dead daemon's child let it go", err)
	}
	defer f.Close()
	b, _ := os.ReadFile(filepath.Join(dir, "staticpodd.lock"))
	if strings.TrimSpace(string(b)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file says %q, want this pid", b)
	}
}
