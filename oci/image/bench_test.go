package image

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// BenchmarkUnpack unpacks a synthetic 200 MiB layer: 1600 files of 64 KiB in 40
// directories, and 12 files of 8 MiB.
func BenchmarkUnpack(b *testing.B) {
	testroot.Require(b)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	small, big := bytes.Repeat([]byte{'s'}, 64<<10), bytes.Repeat([]byte{'b'}, 8<<20)
	add := func(hdr *tar.Header, body []byte) {
		hdr.Size, hdr.ModTime = int64(len(body)), fixtureTime
		if err := tw.WriteHeader(hdr); err != nil {
			b.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			b.Fatal(err)
		}
	}
	for d := range 40 {
		add(&tar.Header{Name: fmt.Sprintf("d%d/", d), Typeflag: tar.TypeDir, Mode: 0o755}, nil)
		for f := range 40 {
			add(&tar.Header{Name: fmt.Sprintf("d%d/f%d", d, f), Typeflag: tar.TypeReg, Mode: 0o644, Uid: 1000}, small)
		}
	}
	for f := range 12 {
		add(&tar.Header{Name: fmt.Sprintf("big%d", f), Typeflag: tar.TypeReg, Mode: 0o644}, big)
	}
	if err := tw.Close(); err != nil {
		b.Fatal(err)
	}
	layer := buf.Bytes()
	b.SetBytes(int64(len(layer)))
	root := b.TempDir()
	b.ResetTimer()
	for i := range b.N {
		dir := filepath.Join(root, fmt.Sprint(i))
		if err := os.Mkdir(dir, 0o755); err != nil {
			b.Fatal(err)
		}
		if _, _, err := unpack(context.Background(), bytes.NewReader(layer), dir, nil); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		os.RemoveAll(dir)
		b.StartTimer()
	}
}
