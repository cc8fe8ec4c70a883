package bundle

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/oci/image"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// zeros reads n zero bytes.
type zeros struct{ n int64 }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n == 0 {
		return 0, io.EOF
	}
	k := int(min(int64(len(p)), z.n))
	clear(p[:k])
	z.n -= int64(k)
	return k, nil
}

// TestApplyLeavesReserve: a bundle is staged, blob by blob, before its
// signature can be checked. An unsigned one, a few KiB of gzip that unpack to
// more than the root dir's filesystem holds, must be refused before it takes
// that filesystem (the image store's, etcd's) below the reserve an image
// import leaves free, not when the filesystem is full.
func TestApplyLeavesReserve(t *testing.T) {
	testroot.Require(t)
	root := t.TempDir()
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "size=32m"); err != nil {
		t.Skipf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(root, unix.MNT_DETACH) })
	s, err := image.Open(filepath.Join(root, "images"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	const size = 40 << 20
	h := sha256.New()
	if _, err := io.Copy(h, &zeros{size}); err != nil {
		t.Fatal(err)
	}
	bomb := filepath.Join(t.TempDir(), "bomb.tar.gz")
	f, err := os.Create(bomb)
	if err != nil {
		t.Fatal(err)
	}
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	layout := []byte(`{"imageLayoutVersion":"1.0.0"}`)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "oci-layout", Mode: 0o644, Size: int64(len(layout))})
	tw.Write(layout)
	tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "blobs/sha256/" + hex.EncodeToString(h.Sum(nil)), Mode: 0o644, Size: size})
	if _, err := io.Copy(tw, &zeros{size}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []io.Closer{tw, zw, f} {
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	_, err = Apply(context.Background(), s, nil, bomb, root, ApplyOptions{})
	if err == nil {
		t.Fatal("applied")
	}
	t.Logf("error: %v", err)
	if strings.Contains(err.Error(), "no space left") || !strings.Contains(err.Error(), "free") {
		t.Errorf("error %q: want the bundle refused for the free space it would leave, before the filesystem is full", err)
	}
}
