//go:build linux

package image

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// On a full disk the kernel cannot make an overlay's work dir and mounts the
// overlay read-only, saying so only in its log. Prepare refuses that rootfs
// rather than hand a container a root it cannot write, leaves nothing
// mounted, and once there is space again prepares a writable one.
func TestPrepareOnFullDiskRefusesReadOnlyRootfs(t *testing.T) {
	testroot.Require(t)
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "fs")
	os.Mkdir(mnt, 0o755)
	f, err := os.Create(img)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(32 << 20)
	f.Close()
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-m", "0", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v\n%s", err, out)
	}
	if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
		t.Fatalf("mount: %v\n%s", err, out)
	}
	t.Cleanup(func() { unix.Unmount(mnt, unix.MNT_DETACH) })
	s, err := Open(filepath.Join(mnt, "images"), discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	importFixture(t, s, map[string]v1.Image{"app:v1": testImage(t)})
	rootfs, _, err := s.Prepare("c", "app:v1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Release("c") })
	// The snapshot is made; its overlay is mounted again on a full disk
	// (as after a reboot, or by a start that comes back to it), with the
	// work dir the kernel must make again gone.
	if err := unix.Unmount(rootfs, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(s.snapshotDir("c"), "work", "work")); err != nil {
		t.Fatal(err)
	}
	fill := filepath.Join(mnt, "fill")
	fillUp(t, fill)
	if _, _, err := s.Prepare("c", "app:v1"); !errors.Is(err, syscall.EROFS) {
		t.Fatalf("Prepare on a full disk: %v, want a refusal of the read-only overlay", err)
	}
	if m := mountedUnder(t, rootfs); len(m) != 0 {
		t.Fatalf("the refused overlay is still mounted: %v", m)
	}
	os.Remove(fill)
	rootfs, _, err = s.Prepare("c", "app:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "written"), []byte("x"), 0o644); err != nil {
		t.Fatalf("the rootfs prepared once there is space again is not writable: %v", err)
	}
}

// fillUp writes file until its filesystem has no block left.
func fillUp(t *testing.T, file string) {
	t.Helper()
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<16)
	for n := len(buf); n > 0; n /= 2 {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				break
			}
		}
	}
}
