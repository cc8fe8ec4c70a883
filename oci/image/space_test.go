package image

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/staticpodd/staticpodd/tests/testroot"
	"golang.org/x/sys/unix"
)

// mountTmpfs mounts a tmpfs of size bytes on a new directory, unmounted when t ends.
func mountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		t.Fatalf("mount tmpfs: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, 0); err != nil {
			t.Errorf("unmount tmpfs: %v", err)
		}
	})
	return dir
}

var (
	zstdEncoder, _ = zstd.NewWriter(nil)
	gzipWriter     = gzip.NewWriter(nil)
	encoderMu      sync.Mutex
)

// member compresses b as one gzip member or one zstd frame. Members and frames
// concatenate: decompressing the concatenation gives the concatenated contents,
// so a bomb is a few members repeated.
func member(t testing.TB, how string, b []byte) []byte {
	t.Helper()
	encoderMu.Lock()
	defer encoderMu.Unlock()
	if how == "zstd" {
		return zstdEncoder.EncodeAll(b, nil)
	}
	var buf bytes.Buffer
	gzipWriter.Reset(&buf)
	if _, err := gzipWriter.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := gzipWriter.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// tarHeader is the header block(s) of a regular file of size bytes.
func tarHeader(t testing.TB, name string, size int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644, Size: size, ModTime: fixtureTime}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes() // the header only: tw is left unclosed, its file unwritten
}

var endOfTar = make([]byte, 1024)

// bomb is a compressed tar: files, each of size zero bytes, then the end blocks
// and trailer zero bytes after them.
func bomb(t testing.TB, how string, files int, size, trailer int64) []byte {
	t.Helper()
	const chunk = 64 << 20
	members := map[int64][]byte{} // of n zero bytes
	zeros := func(n int64) []byte {
		if members[n] == nil {
			members[n] = member(t, how, make([]byte, n))
		}
		return members[n]
	}
	writeZeros := func(buf *bytes.Buffer, n int64) {
		for ; n >= chunk; n -= chunk {
			buf.Write(zeros(chunk))
		}
		if n > 0 {
			buf.Write(zeros(n))
		}
	}
	var buf bytes.Buffer
	for i := range files {
		buf.Write(member(t, how, tarHeader(t, fmt.Sprintf("zeros/%05d", i), size)))
		writeZeros(&buf, size)
	}
	buf.Write(member(t, how, endOfTar))
	writeZeros(&buf, trailer)
	return buf.Bytes()
}

// bombConfig is an image config for layers with the given (made-up) diff IDs:
// a bomb is stopped before its digest is ever checked, so it need not be right.
func bombConfig(t testing.TB, layers int) []byte {
	t.Helper()
	cfg, err := testImage(t, baseEntries).ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.RootFS.DiffIDs = nil
	for i := range layers {
		sum := sha256.Sum256(fmt.Appendf(nil, "bomb %d", i))
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])})
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeOCILayoutRaw writes an OCI layout of one image by hand into dir, so that
// no digest of a layer's uncompressed content is ever computed.
func writeOCILayoutRaw(t testing.TB, dir, ref string, config []byte, layers [][]byte) {
	t.Helper()
	blob := func(b []byte) v1.Hash {
		sum := sha256.Sum256(b)
		h := v1.Hash{Algorithm: "sha256", Hex: hex.EncodeToString(sum[:])}
		p := filepath.Join(dir, "blobs", "sha256", h.Hex)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		return h
	}
	m := v1.Manifest{SchemaVersion: 2, MediaType: "application/vnd.oci.image.manifest.v1+json",
		Config: v1.Descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: blob(config), Size: int64(len(config))}}
	for _, l := range layers {
		m.Layers = append(m.Layers, v1.Descriptor{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Digest: blob(l), Size: int64(len(l))})
	}
	mb, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	idx := v1.IndexManifest{SchemaVersion: 2, MediaType: "application/vnd.oci.image.index.v1+json", Manifests: []v1.Descriptor{{
		MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: blob(mb), Size: int64(len(mb)),
		Annotations: map[string]string{"org.opencontainers.image.ref.name": ref},
	}}}
	ib, err := json.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"index.json": ib, "oci-layout": []byte(`{"imageLayoutVersion":"1.0.0"}`)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// tarDir writes the files under dir into a tar at p.
func tarDir(t testing.TB, dir, p string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tw := tar.NewWriter(f)
	if err := tw.AddFS(os.DirFS(dir)); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// sparseArchive writes at p a plain tar holding name, of size zero bytes, as a
// sparse file, followed by the entries of the tar in tail.
func sparseArchive(t testing.TB, p, name string, size int64, tail []byte) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(tarHeader(t, name, size)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Seek(size, io.SeekCurrent); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(tail); err != nil {
		t.Fatal(err)
	}
}

// freeWatch records the least free space of the filesystem at dir while it runs.
type freeWatch struct {
	stop chan struct{}
	wg   sync.WaitGroup
	min  uint64
}

func watchFree(t *testing.T, dir string) *freeWatch {
	t.Helper()
	w := &freeWatch{stop: make(chan struct{}), min: ^uint64(0)}
	w.wg.Go(func() {
		for {
			if free, _, err := statfs(dir); err == nil {
				w.min = min(w.min, free)
			}
			select {
			case <-w.stop:
				return
			case <-time.After(200 * time.Microsecond):
			}
		}
	})
	return w
}

func (w *freeWatch) done() uint64 {
	close(w.stop)
	w.wg.Wait()
	return w.min
}

// TestImportStopsDecompressionBombs imports archives of a few MB that expand to
// 4 GiB, into a store on a 64 MiB tmpfs that imports must leave half free: each
// fails once it would pass the reserve, or before it writes anything, saying so,
// within seconds; the filesystem never drops below the reserve; the store is
// unchanged. Nothing here checks a bomb's layer digest: the import never gets
// that far.
func TestImportStopsDecompressionBombs(t *testing.T) {
	testroot.Require(t)
	const fsSize, reservePercent = 64 << 20, 50
	const reserve = fsSize * reservePercent / 100
	s, err := Open(filepath.Join(mountTmpfs(t, fsSize), "images"), discardLogger(), WithReserve(reservePercent))
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(t.TempDir(), "good.tar")
	writeDockerArchive(t, good, map[string]v1.Image{"good:v1": testImage(t)})
	if _, err := s.Import(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	want := treeDigest(t, s.Root())
	freeBefore, _, err := statfs(s.Root())
	if err != nil {
		t.Fatal(err)
	}

	const gib = 1 << 30
	cases := []struct {
		name   string
		write  func(t *testing.T, p string)
		reason string
	}{
		{"docker-archive, gzip layer of 1024 files of 4 MiB", func(t *testing.T, p string) {
			dockerArchive{ref: "bomb:v1", config: bombConfig(t, 1), blobs: [][]byte{bomb(t, "gzip", 1024, 4<<20, 0)}}.write(t, p)
		}, "stopped after writing"},
		{"docker-archive, zstd layer of 1024 files of 4 MiB", func(t *testing.T, p string) {
			dockerArchive{ref: "bomb:v1", config: bombConfig(t, 1), blobs: [][]byte{bomb(t, "zstd", 1024, 4<<20, 0)}}.write(t, p)
		}, "stopped after writing"},
		{"docker-archive, gzip layer of one 4 GiB file", func(t *testing.T, p string) {
			dockerArchive{ref: "bomb:v1", config: bombConfig(t, 1), blobs: [][]byte{bomb(t, "gzip", 1, 4*gib, 0)}}.write(t, p)
		}, "stopped after writing"},
		{"docker-archive, gzip layer of 4 GiB after the end of its tar", func(t *testing.T, p string) {
			dockerArchive{ref: "bomb:v1", config: bombConfig(t, 1), blobs: [][]byte{bomb(t, "gzip", 0, 0, 4*gib)}}.write(t, p)
		}, "bytes after the end of the archive"},
		{"OCI archive, gzip layer of 1024 files of 4 MiB", func(t *testing.T, p string) {
			dir := t.TempDir()
			writeOCILayoutRaw(t, dir, "bomb:v1", bombConfig(t, 1), [][]byte{bomb(t, "gzip", 1024, 4<<20, 0)})
			tarDir(t, dir, p)
		}, "stopped after writing"},
		{"OCI layout dir, gzip layer of 1024 files of 4 MiB", func(t *testing.T, p string) {
			writeOCILayoutRaw(t, p, "bomb:v1", bombConfig(t, 1), [][]byte{bomb(t, "gzip", 1024, 4<<20, 0)})
		}, "stopped after writing"},
		{"gzip archive of 4 GiB", func(t *testing.T, p string) {
			// A docker-archive whose first entry is 4 GiB of zeros, the whole gzipped:
			// its decompressed copy is what fills the disk.
			var tail bytes.Buffer
			dockerArchive{ref: "bomb:v1", config: bombConfig(t, 0)}.writeTo(t, &tail)
			var buf bytes.Buffer
			buf.Write(member(t, "gzip", tarHeader(t, "junk", 4*gib)))
			zeros := member(t, "gzip", make([]byte, 64<<20))
			for range 4 * gib / (64 << 20) {
				buf.Write(zeros)
			}
			buf.Write(member(t, "gzip", tail.Bytes()))
			if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "stopped after writing"},
		{"zstd archive of 4 GiB", func(t *testing.T, p string) {
			var tail bytes.Buffer
			dockerArchive{ref: "bomb:v1", config: bombConfig(t, 0)}.writeTo(t, &tail)
			var buf bytes.Buffer
			buf.Write(member(t, "zstd", tarHeader(t, "junk", 4*gib)))
			zeros := member(t, "zstd", make([]byte, 64<<20))
			for range 4 * gib / (64 << 20) {
				buf.Write(zeros)
			}
			buf.Write(member(t, "zstd", tail.Bytes()))
			if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}, "stopped after writing"},
		{"plain OCI archive with a 4 GiB blob", func(t *testing.T, p string) {
			// A sparse file: 4 GiB long, nothing on disk; extracting the layout
			// would write the blob out.
			dir := t.TempDir()
			writeOCILayoutRaw(t, dir, "bomb:v1", bombConfig(t, 0), nil)
			var tail bytes.Buffer
			tw := tar.NewWriter(&tail)
			if err := tw.AddFS(os.DirFS(dir)); err != nil {
				t.Fatal(err)
			}
			if err := tw.Close(); err != nil {
				t.Fatal(err)
			}
			sparseArchive(t, p, "blobs/sha256/junk", 4*gib, tail.Bytes())
		}, "stopped after writing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "bomb")
			c.write(t, p)
			var size int64
			err := filepath.Walk(p, func(_ string, fi os.FileInfo, err error) error {
				if err == nil && fi.Mode().IsRegular() {
					size += fi.Size()
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			w := watchFree(t, s.Root())
			_, err = s.Import(context.Background(), p)
			minFree := w.done()
			took := time.Since(start)
			t.Logf("archive of %d bytes failed after %v, having used at most %s of the filesystem: %v", size, took.Round(time.Millisecond), humanBytes(freeBefore-minFree), err)
			if err == nil {
				t.Fatal("import succeeded")
			}
			for _, want := range []string{p, c.reason} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if took > 10*time.Second {
				t.Errorf("took %v to fail", took)
			}
			if minFree < reserve-(1<<20) {
				t.Errorf("free space went down to %s, below the reserve of %s", humanBytes(minFree), humanBytes(reserve))
			}
			if got := treeDigest(t, s.Root()); got != want {
				t.Errorf("store changed:\n%s\nwant\n%s", got, want)
			}
			if free, _, err := statfs(s.Root()); err != nil || free != freeBefore {
				t.Errorf("free space %d (%v) after the failed import, %d before", free, err, freeBefore)
			}
		})
	}
}

// An import starts only if the filesystem has more free than the reserve, and
// the image fits in what is above it.
func TestImportRespectsReserve(t *testing.T) {
	testroot.Require(t)
	tmpfs := mountTmpfs(t, 64<<20)
	s, err := Open(filepath.Join(tmpfs, "images"), discardLogger(), WithReserve(50))
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "big.tar")
	writeDockerArchive(t, p, map[string]v1.Image{"big:v1": testImage(t, baseEntries, []entry{{name: "big", body: noise(8 << 20)}})})
	want := treeDigest(t, s.Root())

	filler := filepath.Join(tmpfs, "filler")
	if err := os.WriteFile(filler, make([]byte, 28<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	// 64 - 28 = 36 MiB free: above the 32 MiB reserve, but 8 MiB do not fit.
	_, err = s.Import(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "would leave less than 50% (32.0MiB) of the filesystem of "+s.Root()+" free: stopped after writing") {
		t.Errorf("import with 36 MiB free: %v", err)
	}
	if got := treeDigest(t, s.Root()); got != want {
		t.Errorf("store changed:\n%s\nwant\n%s", got, want)
	}

	if err := os.WriteFile(filler, make([]byte, 40<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = s.Import(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "of 64.0MiB on the filesystem of "+s.Root()+", less than the 50% (32.0MiB) an import leaves free: nothing written") {
		t.Errorf("import with 24 MiB free: %v", err)
	}
	if got := treeDigest(t, s.Root()); got != want {
		t.Errorf("store changed:\n%s\nwant\n%s", got, want)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(context.Background(), p); err != nil {
		t.Errorf("import with 64 MiB free: %v", err)
	}
}

// fakeStatfs says the filesystem has size bytes, free of them at first and
// later once more than after bytes have been written (as another writer would).
type fakeStatfs struct {
	mu                sync.Mutex
	calls             int
	size, free, later uint64
}

func (f *fakeStatfs) statfs(string) (uint64, uint64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.calls == 1 {
		return f.free, f.size, nil
	}
	return f.later, f.size, nil
}

// Space others use up while an import runs stops it too: free space is looked at
// again every recheckEvery bytes.
func TestImportRechecksFreeSpace(t *testing.T) {
	testroot.Require(t)
	s := openStore(t)
	fake := &fakeStatfs{size: 100 << 30, free: 90 << 30, later: 10 << 30}
	s.statfs = fake.statfs
	p := filepath.Join(t.TempDir(), "bomb.tar")
	dockerArchive{ref: "bomb:v1", config: bombConfig(t, 1), blobs: [][]byte{bomb(t, "gzip", 1024, 4<<20, 0)}}.write(t, p)
	want := treeDigest(t, s.Root())
	_, err := s.Import(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), "would leave less than 15% (15.0GiB) of the filesystem of "+s.Root()+" free: stopped after writing 64.0MiB") {
		t.Errorf("import while space runs out: %v", err)
	}
	if fake.calls != 2 {
		t.Errorf("free space looked at %d times, want twice", fake.calls)
	}
	if got := treeDigest(t, s.Root()); got != want {
		t.Errorf("store changed:\n%s\nwant\n%s", got, want)
	}
}
