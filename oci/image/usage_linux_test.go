package image

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
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
