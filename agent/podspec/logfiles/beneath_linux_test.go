package logfiles

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// A file of the layout opens only when no component beneath the root is a
// symlink, with openat2 and with the walk used where it is missing alike;
// a FIFO is not opened as a log; MakeContainerDir creates what is missing
// and refuses a symlinked component.
func TestOpenBeneath(t *testing.T) {
	root := t.TempDir()
	host := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "pod/main"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{filepath.Join(root, "pod/main/0.log"), filepath.Join(host, "0.log")} {
		if err := os.WriteFile(p, []byte("x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(host, filepath.Join(root, "pod/swapped")))
	must(os.Symlink(host, filepath.Join(root, "swappedpod")))
	must(os.Symlink(filepath.Join(root, "pod/main"), filepath.Join(root, "pod/inside")))
	must(os.Symlink(filepath.Join(host, "0.log"), filepath.Join(root, "pod/main/1.log")))
	must(syscall.Mkfifo(filepath.Join(root, "pod/main/2.log"), 0o644))

	for _, tc := range []struct {
		path string
		ok   bool
	}{
		{"pod/main/0.log", true},
		{"pod/swapped/0.log", false},
		{"swappedpod/main/0.log", false},
		{"pod/inside/0.log", false}, // no symlink at all, even one that stays inside
		{"pod/main/1.log", false},
		{"pod/main/2.log", false},
	} {
		f, err := OpenLog(filepath.Join(root, tc.path))
		if err == nil {
			f.Close()
		}
		if (err == nil) != tc.ok {
			t.Errorf("OpenLog(%s): %v, want ok %v", tc.path, err, tc.ok)
		}
		// The walk used where openat2 is missing holds the same.
		rfd, err := syscall.Open(root, syscall.O_RDONLY|syscall.O_DIRECTORY, 0)
		must(err)
		_, names := SplitBeneath(filepath.Join(root, tc.path), FileDepth)
		fd, err := walkBeneath(rfd, names, syscall.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK)
		syscall.Close(rfd)
		if err == nil {
			syscall.Close(fd)
		}
		if want := tc.ok || tc.path == "pod/main/2.log"; (err == nil) != want {
			t.Errorf("walkBeneath(%s): %v, want ok %v", tc.path, err, want)
		}
	}

	d, err := MakeContainerDir(filepath.Join(root, "newpod/main"), 0o755)
	if err != nil {
		t.Fatalf("MakeContainerDir of a new pod: %v", err)
	}
	d.Close()
	for _, dir := range []string{"pod/swapped", "swappedpod/main", "swappedpod/new"} {
		if d, err := MakeContainerDir(filepath.Join(root, dir), 0o755); err == nil {
			d.Close()
			t.Errorf("MakeContainerDir(%s) went through a symlink", dir)
		} else if !errors.As(err, new(errNotBeneath)) {
			t.Errorf("MakeContainerDir(%s): %v, want it to say a component is a symlink", dir, err)
		}
	}
	if ents, _ := os.ReadDir(host); len(ents) != 1 {
		t.Errorf("%d entries in the symlinks' target, want its one file", len(ents))
	}
}
