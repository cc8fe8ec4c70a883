package image

import (
	"archive/tar"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/staticpodd/staticpodd/tests/testroot"
	"golang.org/x/sys/unix"
)

// importFormats are the ways an archive reaches Import.
var importFormats = []struct{ format, comp string }{
	{"docker-archive", "none"}, {"docker-archive", "gzip"}, {"docker-archive", "zstd"},
	{"oci-archive", "none"}, {"oci-archive", "gzip"}, {"oci-archive", "zstd"},
	{"oci-dir", "none"},
}

func writeFormat(t testing.TB, p, format, comp string, refs map[string]v1.Image) {
	t.Helper()
	switch format {
	case "docker-archive":
		writeDockerArchive(t, p, refs)
	case "oci-archive":
		writeOCIArchive(t, p, refs)
	case "oci-dir":
		writeLayout(t, p, refs)
	}
	compress(t, p, comp)
}

// hostileSetup is a store holding one good image, next to a directory standing
// for the rest of the host, with the digests of both.
type hostileSetup struct {
	s                      *Store
	outside                string
	storeWant, outsideWant string
}

func newHostileSetup(t *testing.T) *hostileSetup {
	t.Helper()
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	for _, d := range []string{"etc", "sub"} {
		if err := os.MkdirAll(filepath.Join(outside, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(outside, "etc", "passwd"), []byte("host\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	for _, p := range []string{filepath.Join(outside, "sub"), filepath.Join(outside, "etc"), outside} {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	s, err := Open(filepath.Join(base, "images"), discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	good := filepath.Join(t.TempDir(), "good.tar")
	writeDockerArchive(t, good, map[string]v1.Image{"good:v1": testImage(t)})
	if _, err := s.Import(context.Background(), good); err != nil {
		t.Fatal(err)
	}
	return &hostileSetup{s: s, outside: outside, storeWant: treeDigest(t, s.Root()), outsideWant: treeDigest(t, outside)}
}

// unchanged fails t unless the store and the outside are as they were.
func (h *hostileSetup) unchanged(t *testing.T) {
	t.Helper()
	if got := treeDigest(t, h.s.Root()); got != h.storeWant {
		t.Errorf("store changed:\n%s\nwant\n%s", got, h.storeWant)
	}
	if got := treeDigest(t, h.outside); got != h.outsideWant {
		t.Errorf("outside the store changed:\n%s\nwant\n%s", got, h.outsideWant)
	}
}

// TestImportRefusesHostileLayers imports layers whose entries try to leave the
// layer, or whiteouts that name no file, in every archive format: each import
// fails naming the archive, the layer, the entry and the reason, and neither the
// store nor anything outside it changes.
func TestImportRefusesHostileLayers(t *testing.T) {
	testroot.Require(t)
	h := newHostileSetup(t)
	cases := []struct {
		name    string
		entries []entry
		entry   string // the entry the error names
		reason  string
	}{
		{"whiteout of nothing", []entry{{name: ".wh."}}, ".wh.", `whiteout of ""`},
		{"whiteout of the layer root", []entry{{name: "etc/", typ: tar.TypeDir}, {name: ".wh.."}}, ".wh..", `whiteout of "."`},
		{"whiteout of the staging dir", []entry{{name: ".wh..."}}, ".wh...", `whiteout of ".."`},
		{"whiteout of a dir's parent", []entry{{name: "etc/", typ: tar.TypeDir}, {name: "etc/.wh..."}}, "etc/.wh...", `whiteout of ".."`},
		{"whiteout of a dir itself", []entry{{name: "etc/.wh.."}}, "etc/.wh..", `whiteout of "."`},
		{"whiteout as a directory", []entry{{name: ".wh.x/", typ: tar.TypeDir}}, ".wh.x/", "not a regular file"},
		{"whiteout with content below", []entry{{name: ".wh.x/y", body: "y"}}, ".wh.x/y", "whiteout .wh.x used as a directory"},
		{"whiteout as a symlink", []entry{{name: ".wh.x", typ: tar.TypeSymlink, link: "/etc"}}, ".wh.x", "not a regular file"},
		{"whiteout as a hard link", []entry{{name: "f", body: "f"}, {name: ".wh.x", typ: tar.TypeLink, link: "f"}}, ".wh.x", "not a regular file"},
		{"opaque whiteout at the root", []entry{{name: ".wh..wh..opq"}}, ".wh..wh..opq", "opaque whiteout at the layer root"},
		{"opaque whiteout at ./", []entry{{name: "./.wh..wh..opq"}}, "./.wh..wh..opq", "opaque whiteout at the layer root"},
		{"opaque whiteout as a directory", []entry{{name: "d/.wh..wh..opq/", typ: tar.TypeDir}}, "d/.wh..wh..opq/", "not a regular file"},
		{"opaque whiteout with content below", []entry{{name: "d/.wh..wh..opq/x", body: "x"}}, "d/.wh..wh..opq/x", "opaque whiteout .wh..wh..opq used as a directory"},
		{"opaque whiteout through a symlink", []entry{{name: "d", typ: tar.TypeSymlink, link: "/etc"}, {name: "d/.wh..wh..opq"}}, "d/.wh..wh..opq", "parent d is not a directory"},
		{"whiteout through a symlink", []entry{{name: "d", typ: tar.TypeSymlink, link: "../../outside/etc"}, {name: "d/.wh.passwd"}}, "d/.wh.passwd", "parent d is not a directory"},
		{"file through a symlink", []entry{{name: "d", typ: tar.TypeSymlink, link: "/"}, {name: "d/etc/passwd", body: "x"}}, "d/etc/passwd", "parent d is not a directory"},
		{"dot-dot path", []entry{{name: "../x", body: "x"}}, "../x", "escapes the layer root"},
		{"rooted dot-dot path", []entry{{name: "//../x", body: "x"}}, "//../x", "escapes the layer root"},
		{"hard link out", []entry{{name: "h", typ: tar.TypeLink, link: "../../../outside/etc/passwd"}}, "h", "escapes the layer root"},
		{"file as the layer root", []entry{{name: ".", body: "x"}}, ".", "names the layer root"},
		{"symlink as the layer root", []entry{{name: ".", typ: tar.TypeSymlink, link: "/"}}, ".", "names the layer root"},
	}
	for _, f := range importFormats {
		t.Run(f.format+"/"+f.comp, func(t *testing.T) {
			for _, c := range cases {
				t.Run(c.name, func(t *testing.T) {
					p := filepath.Join(t.TempDir(), "hostile")
					writeFormat(t, p, f.format, f.comp, map[string]v1.Image{"hostile:v1": testImage(t, baseEntries, c.entries)})
					_, err := h.s.Import(context.Background(), p)
					if err == nil {
						t.Fatal("import succeeded")
					}
					for _, want := range []string{p, "unpack layer sha256:", "entry " + c.entry + ":", c.reason} {
						if !strings.Contains(err.Error(), want) {
							t.Errorf("error %q does not say %q", err, want)
						}
					}
					h.unchanged(t)
				})
			}
		})
	}
}

// A directory replaced by a symlink later in the same layer is legal, and the
// directory's times, applied at the end, do not go through the symlink.
func TestImportDirReplacedBySymlink(t *testing.T) {
	testroot.Require(t)
	h := newHostileSetup(t)
	p := filepath.Join(t.TempDir(), "swap.tar")
	layer := []entry{
		{name: "x/", typ: tar.TypeDir, mode: 0o755},
		{name: "x/sub/", typ: tar.TypeDir, mode: 0o755},
		{name: "x/etc/", typ: tar.TypeDir, mode: 0o755},
		{name: "x", typ: tar.TypeSymlink, link: h.outside},
	}
	writeDockerArchive(t, p, map[string]v1.Image{"swap:v1": testImage(t, layer)})
	imgs, err := h.s.Import(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := os.Readlink(filepath.Join(h.s.layerDir(imgs[0].Layers[0]), "x")); err != nil || got != h.outside {
		t.Errorf("x -> %q, %v; want %s", got, err, h.outside)
	}
	if got := treeDigest(t, h.outside); got != h.outsideWant {
		t.Errorf("outside the store changed:\n%s\nwant\n%s", got, h.outsideWant)
	}
}

// Names with several leading slashes are read as tar reads them, relative to the
// layer root.
func TestImportRootedNames(t *testing.T) {
	testroot.Require(t)
	s := openStore(t)
	p := filepath.Join(t.TempDir(), "rooted.tar")
	writeDockerArchive(t, p, map[string]v1.Image{"rooted:v1": testImage(t, []entry{{name: "//etc/", typ: tar.TypeDir, mode: 0o755}, {name: "///etc/hosts", body: "h"}})})
	imgs, err := s.Import(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(s.layerDir(imgs[0].Layers[0]), "etc", "hosts")); err != nil || string(b) != "h" {
		t.Errorf("etc/hosts = %q, %v", b, err)
	}
}

// Whiteouts that name a file, aufs bookkeeping and an opaque directory still
// unpack as overlayfs wants them.
func TestImportWhiteouts(t *testing.T) {
	testroot.Require(t)
	s := openStore(t)
	p := filepath.Join(t.TempDir(), "wh.tar")
	layer := []entry{
		{name: ".wh.gone"},
		{name: "d/", typ: tar.TypeDir, mode: 0o755},
		{name: "d/.wh..wh..opq"},
		{name: "d/.wh.old.txt"},
		{name: ".wh..wh.plnk/", typ: tar.TypeDir, mode: 0o700},
		{name: ".wh..wh.plnk/123.456", body: "aufs"},
		{name: ".wh..wh.aufs"},
	}
	writeDockerArchive(t, p, map[string]v1.Image{"wh:v1": testImage(t, layer)})
	imgs, err := s.Import(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	dir := s.layerDir(imgs[0].Layers[0])
	for _, name := range []string{"gone", "d/old.txt"} {
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, name), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFCHR || st.Rdev != 0 {
			t.Errorf("%s is not a 0/0 whiteout: mode %o rdev %d (%v)", name, st.Mode, st.Rdev, err)
		}
	}
	buf := make([]byte, 8)
	if n, err := unix.Lgetxattr(filepath.Join(dir, "d"), "trusted.overlay.opaque", buf); err != nil || string(buf[:n]) != "y" {
		t.Errorf("d opaque = %q, %v; want y", buf[:n], err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "d gone" {
		t.Errorf("layer holds %v, want [d gone]", names)
	}
}

// A hostile archive dropped into the import folder fails like one given to
// Import: the store is unchanged but for the watcher's own record of the failure.
func TestWatchImportsRefusesHostileArchive(t *testing.T) {
	testroot.Require(t)
	h := newHostileSetup(t)
	h.s.importQuiet = 100 * time.Millisecond
	dir := filepath.Join(h.s.Root(), "import")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	// The watcher's record replaces import-state.json, which changes the store
	// root's mtime: the first line of the digest.
	storeDigest := func() string {
		_, rest, _ := strings.Cut(treeDigest(t, h.s.Root(), "import", "import-state.json"), "\n")
		return rest
	}
	want := storeDigest()
	_, stop := startWatch(t, h.s, dir)
	defer stop()
	for _, f := range importFormats {
		if f.format == "oci-dir" {
			continue // the import folder takes files only
		}
		name := "hostile-" + f.format + "." + f.comp
		src := filepath.Join(t.TempDir(), name)
		writeFormat(t, src, f.format, f.comp, map[string]v1.Image{"hostile:v1": testImage(t, baseEntries, []entry{{name: ".wh..."}})})
		if err := os.Rename(src, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for {
			seen, err := h.s.readImportState()
			if err != nil {
				t.Fatal(err)
			}
			if rec, ok := seen[name]; ok {
				if !strings.Contains(rec.Err, `entry .wh...: whiteout of ".."`) {
					t.Errorf("%s: recorded error %q", name, rec.Err)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no import recorded", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got := storeDigest(); got != want {
			t.Errorf("%s: store changed:\n%s\nwant\n%s", name, got, want)
		}
		if got := treeDigest(t, h.outside); got != h.outsideWant {
			t.Errorf("%s: outside the store changed:\n%s\nwant\n%s", name, got, h.outsideWant)
		}
	}
}

// An OCI archive is extracted into staging before it is read: an entry whose
// name leaves the layout is refused, and nothing outside the store is written.
func TestImportRefusesEscapingOCIArchive(t *testing.T) {
	testroot.Require(t)
	h := newHostileSetup(t)
	for _, name := range []string{"../../outside/etc/passwd", "blobs/sha256/../../../../outside/x", "/" + filepath.Join(h.outside, "abs")} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "layout.tar")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			tw := tar.NewWriter(f)
			for _, e := range []struct{ name, body string }{{"oci-layout", `{"imageLayoutVersion":"1.0.0"}`}, {name, "pwned\n"}, {"index.json", `{"schemaVersion":2,"manifests":[]}`}} {
				if err := tw.WriteHeader(&tar.Header{Name: e.name, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(e.body))}); err != nil {
					t.Fatal(err)
				}
				if _, err := tw.Write([]byte(e.body)); err != nil {
					t.Fatal(err)
				}
			}
			if err := tw.Close(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			_, err = h.s.Import(context.Background(), p)
			if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "escapes the layout") {
				t.Errorf("import: %v, want it to name the archive and say the entry escapes", err)
			}
			h.unchanged(t)
		})
	}
}
