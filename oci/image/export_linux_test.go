package image

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// exportTo exports refs of s into a buffer.
func exportTo(t *testing.T, s *Store, refs ...string) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Export(context.Background(), &buf, refs); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func importBytes(t *testing.T, s *Store, b []byte) []Image {
	t.Helper()
	imgs, err := s.ImportReader(context.Background(), bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	return imgs
}

// An exported image imported into a fresh store has the same references,
// config and layer content (owners, modes, setuid, xattrs, hard links,
// devices, whiteouts and opaque directories); export is the same bytes each
// time, and an image exported, imported and exported again keeps its ID.
func TestExportRoundTrip(t *testing.T) {
	testroot.Require(t)
	src := openStore(t)
	p := filepath.Join(t.TempDir(), "img.tar")
	writeDockerArchive(t, p, map[string]v1.Image{"example.com/team/app:v1": testImage(t), "example.com/base:v1": testImage(t, baseEntries)})
	if _, err := src.Import(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	srcImg, _ := src.Get("example.com/team/app:v1")
	out := exportTo(t, src, "example.com/team/app:v1", "example.com/base:v1")
	if again := exportTo(t, src, "example.com/team/app:v1", "example.com/base:v1"); !bytes.Equal(out, again) {
		t.Error("two exports of the same images differ")
	}

	dst := openStore(t)
	imgs := importBytes(t, dst, out)
	if len(imgs) != 2 {
		t.Fatalf("imported %d images, want 2", len(imgs))
	}
	got, err := dst.Get("example.com/team/app:v1")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got.Refs, srcImg.Refs) || !slices.Equal(got.Config.Cmd, srcImg.Config.Cmd) || !slices.Equal(got.Config.Env, srcImg.Config.Env) || !got.Created.Equal(srcImg.Created) {
		t.Errorf("imported %+v, want the refs and config of %+v", got, srcImg)
	}
	if len(got.Layers) != len(srcImg.Layers) { // sizes are of the tars: they differ
		t.Fatalf("imported layers %v, want %d layers", got.Layers, len(srcImg.Layers))
	}
	for i := range got.Layers {
		if a, b := layerDigest(t, src.layerDir(srcImg.Layers[i]), "gone.txt"), layerDigest(t, dst.layerDir(got.Layers[i]), "gone.txt"); a != b {
			t.Errorf("layer %d differs:\n%s\nwant\n%s", i, b, a)
		}
	}
	top := dst.layerDir(got.Layers[1])
	if v, err := getxattr(filepath.Join(top, "opaque"), "trusted.overlay.opaque"); err != nil || string(v) != "y" {
		t.Errorf("opaque dir: %q %v", v, err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(filepath.Join(top, "gone.txt"), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
		t.Errorf("whiteout of gone.txt: %+v %v", st, err)
	}
	base := dst.layerDir(got.Layers[0])
	if v, err := getxattr(filepath.Join(base, "bin/tool"), "user.origin"); err != nil || string(v) != "fixture" {
		t.Errorf("xattr: %q %v", v, err)
	}
	// The base layer is shared by both images, in the archive and the store.
	if b, _ := dst.Get("example.com/base:v1"); b.Layers[0] != got.Layers[0] {
		t.Errorf("base layer %s, app's %s: want one", b.Layers[0], got.Layers[0])
	}
	if n := countDir(t, dst.layersDir()); n != 2 {
		t.Errorf("%d layers, want 2", n)
	}
	// Exported again from the new store: the same archive, the same ID.
	if again := exportTo(t, dst, "example.com/team/app:v1", "example.com/base:v1"); !bytes.Equal(out, again) {
		t.Error("export of the re-imported images differs from the first export")
	}

	// The docker-archive half alone (manifest.json, what docker load reads).
	docker := filterTar(t, out, func(name string) bool { return name != "index.json" && name != "oci-layout" })
	other := openStore(t)
	dimgs := importBytes(t, other, docker)
	if len(dimgs) != 2 || dimgs[0].ID != imgs[0].ID && dimgs[0].ID != imgs[1].ID {
		t.Errorf("docker-archive half: %+v, want the images of the OCI layout %+v", dimgs, imgs)
	}
	if _, err := other.Get("example.com/team/app:v1"); err != nil {
		t.Error(err)
	}
}

// filterTar copies the tar b, keeping the entries keep says to.
func filterTar(t *testing.T, b []byte, keep func(string) bool) []byte {
	t.Helper()
	var out bytes.Buffer
	tr, tw := tar.NewReader(bytes.NewReader(b)), tar.NewWriter(&out)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !keep(hdr.Name) {
			continue
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(tw, tr); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// A stream import that is cut short, garbage, empty or bigger than the
// reserve allows fails saying why and leaves the store as it was.
func TestImportReaderHostile(t *testing.T) {
	testroot.Require(t)
	p := filepath.Join(t.TempDir(), "img.tar")
	writeDockerArchive(t, p, map[string]v1.Image{"example.com/a:v1": testImage(t)})
	good, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	importBytes(t, s, good) // one image present
	before := treeDigest(t, s.Root())
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"truncated", good[:len(good)/2], ""},
		{"garbage", bytes.Repeat([]byte("not a tar "), 1000), ""},
		{"empty", nil, "empty"},
		{"gzip garbage", append([]byte{0x1f, 0x8b}, bytes.Repeat([]byte{0}, 100)...), ""},
	} {
		_, err := s.ImportReader(context.Background(), bytes.NewReader(tc.in))
		if err == nil {
			t.Errorf("%s: import succeeded", tc.name)
			continue
		}
		if !strings.Contains(err.Error(), "import from stream") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %q, want one saying import from stream and %q", tc.name, err, tc.want)
		}
		if after := treeDigest(t, s.Root()); after != before {
			t.Errorf("%s: store changed:\n%s\nwas\n%s", tc.name, after, before)
		}
	}
	// Bigger than the reserve leaves room for: stopped before it is all written.
	reserve := uint64(1<<30) * DefaultReservePercent / 100
	fake := &fakeStatfs{size: 1 << 30, free: reserve + 1024, later: reserve + 1024} // 1KiB over the reserve
	s.statfs = fake.statfs
	_, err = s.ImportReader(context.Background(), bytes.NewReader(good))
	if err == nil || !strings.Contains(err.Error(), "free") {
		t.Errorf("over the reserve: %v, want an error about free space", err)
	}
	if after := treeDigest(t, s.Root()); after != before {
		t.Errorf("over the reserve: store changed")
	}
}

// Imports of images sharing a base layer, run at once, again and again,
// each leave the layer unpacked once, whole, and shared by both images.
func TestConcurrentImportsSharedBaseRepeated(t *testing.T) {
	testroot.Require(t)
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	writeDockerArchive(t, a, map[string]v1.Image{"app:a": testImage(t, baseEntries, topEntries)})
	writeDockerArchive(t, b, map[string]v1.Image{"app:b": testImage(t, baseEntries, []entry{{name: "b.txt", body: "b"}})})
	var want string
	for round := range 5 {
		s := openStore(t)
		errs := make(chan error, 4)
		for _, p := range []string{a, b, b, a} {
			go func() {
				other, err := Open(s.Root(), discardLogger())
				if err == nil {
					_, err = other.Import(context.Background(), p)
				}
				errs <- err
			}()
		}
		for range 4 {
			if err := <-errs; err != nil {
				t.Errorf("round %d: %v", round, err)
			}
		}
		ia, err1 := s.Get("app:a")
		ib, err2 := s.Get("app:b")
		if err := errors.Join(err1, err2); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if ia.Layers[0] != ib.Layers[0] {
			t.Fatalf("round %d: base layers %s and %s", round, ia.Layers[0], ib.Layers[0])
		}
		if n := countDir(t, s.layersDir()); n != 3 {
			t.Errorf("round %d: %d layer dirs, want 3", round, n)
		}
		if n := countDir(t, s.tmpDir()); n != 0 {
			t.Errorf("round %d: %d staging dirs left", round, n)
		}
		got := layerDigest(t, s.layerDir(ia.Layers[0]))
		if round == 0 {
			want = got
		} else if got != want {
			t.Errorf("round %d: base layer differs from round 0's:\n%s", round, got)
		}
		if _, err := os.Readlink(s.linkPath(ia.Layers[0])); err != nil {
			t.Errorf("round %d: base layer link: %v", round, err)
		}
	}
}

// layerDigest is treeDigest of a layer dir but its root, whose mtime is when
// it was unpacked, and the skip paths (whiteouts, whose time is when they
// were unpacked too).
func layerDigest(t *testing.T, dir string, skip ...string) string {
	t.Helper()
	_, rest, _ := strings.Cut(treeDigest(t, dir, skip...), "\n")
	return rest
}
