package testroot

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// LoopFS mounts a new ext4 filesystem of size bytes (no blocks reserved for
// root) at dir, on a loop device: a small disk of the test's own, to fill.
// At the end of the test it is unmounted (lazily, with an error, when
// something still holds it) and its loop device detached, even when the test
// fails.
func LoopFS(t testing.TB, dir string, size int64) {
	t.Helper()
	img := dir + ".img"
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	run := func(name string, args ...string) string {
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	run("mkfs.ext4", "-q", "-F", "-m", "0", img)
	dev := run("losetup", "--find", "--show", img)
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("detach %s: %v %s", dev, err, out)
		}
	})
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	run("mount", dev, dir)
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v (detached lazily)", dir, err)
			_ = unix.Unmount(dir, unix.MNT_DETACH)
		}
	})
}
