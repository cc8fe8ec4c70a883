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

// Usage counts the store's own files and inodes, and does not enter a
// container's mounted root filesystem, which would count its image twice.
func TestStoreUsageStaysOnItsFilesystem(t *testing.T) {
	s := openStore(t)
	layer := filepath.Join(s.layersDir(), "ab")
	if err := os.MkdirAll(layer, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(layer, "f"), make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	before, inodes, err := s.Usage()
	if err != nil {
		t.Fatal(err)
	}
	// root, layers, layers/ab, f, l, snapshots, tmp (and the lock file).
	if before < 1<<20 || before > 2<<20 || inodes < 7 || inodes > 16 {
		t.Fatalf("Usage = %d bytes, %d inodes; want the 1 MiB file and a few dirs", before, inodes)
	}
	if os.Geteuid() != 0 {
		t.Skip("mounting a container's rootfs needs root")
	}
	rootfs := filepath.Join(s.snapshotsDir(), "k", "rootfs")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", rootfs, "tmpfs", 0, "size=16m"); err != nil {
		t.Fatal(err)
	}
	defer unix.Unmount(rootfs, unix.MNT_DETACH)
	if err := os.WriteFile(filepath.Join(rootfs, "big"), make([]byte, 8<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	after, _, err := s.Usage()
	if err != nil {
		t.Fatal(err)
	}
	if after > before+1<<20 {
		t.Fatalf("Usage = %d bytes with a mounted rootfs, was %d: it entered the mount", after, before)
	}
}
