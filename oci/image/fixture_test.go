package image

import (
	"archive/tar"
	"bytes"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

var fixtureTime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// entry is one file of a hand-made layer.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
	uid, gid         int
	xattrs           map[string]string
	major, minor     int64
}

func layerTar(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name: e.name, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			Linkname: e.link, ModTime: fixtureTime, Size: int64(len(e.body)),
			Devmajor: e.major, Devminor: e.minor, Format: tar.FormatPAX,
		}
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if hdr.Mode == 0 {
			hdr.Mode = 0o644
		}
		if hdr.Typeflag != tar.TypeReg {
			hdr.Size = 0
		}
		for k, v := range e.xattrs {
			if hdr.PAXRecords == nil {
				hdr.PAXRecords = map[string]string{}
			}
			hdr.PAXRecords["SCHILY.xattr."+k] = v
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if hdr.Size > 0 {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func layerOf(t testing.TB, entries []entry) v1.Layer {
	t.Helper()
	b := layerTar(t, entries)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// baseEntries and topEntries make a two-layer image exercising what unpacking must
// keep: ownership, setuid, xattrs, hard links, symlinks, devices, whiteouts.
var baseEntries = []entry{
	{name: "etc/", typ: tar.TypeDir, mode: 0o755},
	{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\n"},
	{name: "bin/", typ: tar.TypeDir, mode: 0o755},
	{name: "bin/tool", body: "#!/bin/sh\necho tool\n", mode: 0o4755, uid: 1000, gid: 1000, xattrs: map[string]string{"user.origin": "fixture"}},
	{name: "bin/tool-link", typ: tar.TypeLink, link: "bin/tool"},
	{name: "bin/sh", typ: tar.TypeSymlink, link: "tool"},
	{name: "dev/", typ: tar.TypeDir, mode: 0o755},
	{name: "dev/null", typ: tar.TypeChar, mode: 0o666, major: 1, minor: 3},
	{name: "opaque/", typ: tar.TypeDir, mode: 0o755},
	{name: "opaque/old.txt", body: "old"},
	{name: "gone.txt", body: "soon gone"},
	{name: "tmp/", typ: tar.TypeDir, mode: 0o1777},
}

var topEntries = []entry{
	{name: ".wh.gone.txt"},
	{name: "opaque/", typ: tar.TypeDir, mode: 0o755},
	{name: "opaque/.wh..wh..opq"},
	{name: "opaque/new.txt", body: "new"},
	{name: "etc/passwd", body: "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534::/:/bin/false\n"},
}

func testImage(t testing.TB, layers ...[]entry) v1.Image {
	t.Helper()
	if len(layers) == 0 {
		layers = [][]entry{baseEntries, topEntries}
	}
	img := empty.Image
	for _, l := range layers {
		var err error
		img, err = mutate.AppendLayers(img, layerOf(t, l))
		if err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Cmd = []string{"sh"}
	cfg.Config.Env = []string{"PATH=/bin"}
	cfg.Created = v1.Time{Time: fixtureTime}
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// compress wraps the file at p in gzip or zstd, in place.
func compress(t testing.TB, p, how string) {
	t.Helper()
	if how == "none" {
		return
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	var w io.WriteCloser
	switch how {
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "zstd":
		w, err = zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeDockerArchive(t testing.TB, p string, refs map[string]v1.Image) {
	t.Helper()
	m := map[name.Reference]v1.Image{}
	for r, img := range refs {
		tag, err := name.NewTag(r)
		if err != nil {
			t.Fatal(err)
		}
		m[tag] = img
	}
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := tarball.MultiRefWrite(m, f); err != nil {
		t.Fatal(err)
	}
}

func writeLayout(t testing.TB, dir string, refs map[string]v1.Image) {
	t.Helper()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	for r, img := range refs {
		if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": r})); err != nil {
			t.Fatal(err)
		}
	}
}

// writeOCIArchive writes an OCI layout into a tar at p, as skopeo's oci-archive does.
func writeOCIArchive(t testing.TB, p string, refs map[string]v1.Image) {
	t.Helper()
	dir := t.TempDir()
	writeLayout(t, dir, refs)
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

func openStore(t testing.TB) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "images"), discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	return s
}
