package oci

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// One holder at a time: a second taker is told the holder's pid, and the
// lock is free again once the holder closes it.
func TestLockRunDir(t *testing.T) {
	dir := t.TempDir()
	first, err := LockRunDir(dir)
	if err != nil {
		t.Fatalf("first lock: %v", err)
	}
	pid, err := os.ReadFile(filepath.Join(dir, LockFile))
	if err != nil || strings.TrimSpace(string(pid)) != strconv.Itoa(os.Getpid()) {
		t.Fatalf("lock file holds %q, %v; want this pid", pid, err)
	}
	if second, err := LockRunDir(dir); err == nil {
		second.Close()
		t.Fatal("second lock taken while the first is held")
	} else if want := "another staticpodd (pid " + strconv.Itoa(os.Getpid()) + ") runs on --run-dir " + dir; err.Error() != want {
		t.Fatalf("second lock: %q, want %q", err, want)
	}
	first.Close()
	again, err := LockRunDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.Close()
}

func TestLockRunDirMissingDir(t *testing.T) {
	if f, err := LockRunDir(filepath.Join(t.TempDir(), "none")); err == nil {
		f.Close()
		t.Fatal("lock in a missing dir succeeded")
	}
}
