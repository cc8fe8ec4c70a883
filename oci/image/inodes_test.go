package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// emptyFilesImage is an image of one layer of n empty files (and
// symlinks, every tenth): a few hundred KiB of gzip for 40,000 inodes.
func emptyFilesImage(t *testing.T, n int) v1.Image {
	t.Helper()
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	if err := tw.WriteHeader(&tar.Header{Name: "d/", Typeflag: tar.TypeDir, Mode: 0o755}); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		hdr := &tar.Header{Name: fmt.Sprintf("d/%d", i), Typeflag: tar.TypeReg, Mode: 0o644}
		if i%10 == 9 {
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, "0"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(raw.Bytes()); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	b := gz.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// An image of many empty files, which cost no bytes, cannot take the
// store's filesystem below the reserve of its inodes either: a layer of
// 270 KiB used 39,000 of 40,000 inodes, past the 15% reserve.
func TestImportRespectsInodeReserve(t *testing.T) {
	testroot.Require(t)
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=256m,nr_inodes=40000,mode=0700"); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount tmpfs: %v", err)
		}
	})
	s, err := Open(filepath.Join(dir, "images"), discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "many.tar")
	writeDockerArchive(t, p, map[string]v1.Image{"many:v1": emptyFilesImage(t, 39000)})
	want := treeDigest(t, s.Root())
	_, err = s.Import(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "would leave less than 15% (6000) of the inodes of the filesystem of "+s.Root()+" free") {
		t.Errorf("import of 39,000 files with 40,000 inodes: %v", err)
	}
	if got := treeDigest(t, s.Root()); got != want {
		t.Errorf("store changed:\n%s\nwant\n%s", got, want)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if st.Ffree < 6000 {
		t.Errorf("%d inodes of %d free after the import, want the reserve", st.Ffree, st.Files)
	}

	p = filepath.Join(t.TempDir(), "few.tar")
	writeDockerArchive(t, p, map[string]v1.Image{"few:v1": emptyFilesImage(t, 1000)})
	if _, err := s.Import(context.Background(), p); err != nil {
		t.Errorf("import of 1,000 files with 40,000 inodes: %v", err)
	}
}
