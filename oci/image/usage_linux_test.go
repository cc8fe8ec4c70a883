package image

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// What a container leaves in its writable layer is hostile: symlinks out of
// it (to / and in a loop), a FIFO and a device node are counted as entries,
// never followed or opened.
func TestDirBytesHostileLayer(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "data"), make([]byte, 64<<10), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Symlink("/", filepath.Join(dir, "root"))
	os.Symlink("loop", filepath.Join(dir, "loop"))
	os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
	os.Symlink("../..", filepath.Join(dir, "a", "b", "up"))
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644)
	n, err := dirBytes(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n < 64<<10 || n > 1<<20 {
		t.Errorf("dirBytes = %d, want the 64 KiB file and a few blocks, nothing of /", n)
	}
	if n, err := dirBytes(filepath.Join(dir, "missing")); err != nil || n != 0 {
		t.Errorf("missing dir: %d %v, want 0", n, err)
	}
	s := &Store{root: dir}
	if _, err := s.WritableBytes("../../etc"); err == nil {
		t.Error("WritableBytes took a key that leaves the snapshots dir")
	}
}

// A container that keeps swapping a directory of its layer with a symlink out
// of it (rename(2) with RENAME_EXCHANGE, atomic) never gets the walk to count
// what the symlink points at, whatever moment the walk looks.
func TestDirBytesDirectorySwappedForSymlink(t *testing.T) {
	layer, outside := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "big"), make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	d, s := filepath.Join(layer, "d"), filepath.Join(layer, "s")
	if err := os.MkdirAll(filepath.Join(d, "e"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, s); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := unix.Renameat2(unix.AT_FDCWD, d, unix.AT_FDCWD, s, unix.RENAME_EXCHANGE); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	defer func() { close(stop); <-done }()
	for end := time.Now().Add(time.Second); time.Now().Before(end); {
		n, err := dirBytes(layer)
		if err != nil {
			t.Fatal(err)
		}
		if n >= 8<<20 {
			t.Fatalf("dirBytes = %d: the walk followed the swapped-in symlink to the 8 MiB file outside the layer", n)
		}
	}
}
