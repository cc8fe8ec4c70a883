package busybox

import (
	"archive/tar"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// WriteDir lays out on disk exactly the entries the image's layer holds:
// the same names, types, modes, contents and link targets.
func TestWriteDirIsTheLayer(t *testing.T) {
	bb, err := exec.LookPath("busybox")
	if err != nil {
		t.Fatalf("busybox not installed (apt-get install busybox-static): %v", err)
	}
	bin, err := os.ReadFile(bb)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "rootfs")
	if err := WriteDir(dir, bb); err != nil {
		t.Fatal(err)
	}
	want := map[string]Entry{}
	for _, e := range append(Base(bin), Links(Applets(bb))...) {
		want[e.Name] = e
	}
	got := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		got++
		e, ok := want[filepath.ToSlash(rel)]
		if !ok {
			t.Errorf("%s is not in the layer", rel)
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		mode := int64(fi.Mode().Perm())
		if fi.Mode()&os.ModeSticky != 0 {
			mode |= 0o1000
		}
		switch e.Type {
		case tar.TypeDir:
			if !fi.IsDir() || mode != e.Mode {
				t.Errorf("%s: %v, want a directory of mode %o", rel, fi.Mode(), e.Mode)
			}
		case tar.TypeReg:
			b, _ := os.ReadFile(p)
			if !fi.Mode().IsRegular() || mode != e.Mode || string(b) != string(e.Body) {
				t.Errorf("%s: %v, %d bytes; want a file of mode %o, %d bytes", rel, fi.Mode(), len(b), e.Mode, len(e.Body))
			}
		case tar.TypeSymlink:
			if target, err := os.Readlink(p); err != nil || target != e.Link {
				t.Errorf("%s -> %q %v, want -> %s", rel, target, err, e.Link)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got != len(want) {
		t.Errorf("%d files on disk, %d in the layer", got, len(want))
	}
	if _, err := os.Lstat(filepath.Join(dir, "bin", "sh")); err != nil {
		t.Errorf("no bin/sh: %v", err)
	}
}
