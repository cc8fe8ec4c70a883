package hostile

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

var fixedTime = time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)

// entry is one tar entry, of a layer or of an archive; typ 0 is a regular file.
type entry struct {
	name, body, link string
	typ              byte
	mode             int64
	uid, gid         int
	major, minor     int64
}

func tarOf(t testing.TB, entries []entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name: e.name, Typeflag: e.typ, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			Linkname: e.link, ModTime: fixedTime, Size: int64(len(e.body)),
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
	b := tarOf(t, entries)
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil })
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// imageOf stacks layers on base (nil: an empty image) and gives the result
// this machine's platform and a fixed creation time; edit may change the config.
func imageOf(t testing.TB, base v1.Image, edit func(*v1.Config), layers ...[]entry) v1.Image {
	t.Helper()
	img := base
	if img == nil {
		img = empty.Image
	}
	for _, l := range layers {
		var err error
		if img, err = mutate.AppendLayers(img, layerOf(t, l)); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Created = v1.Time{Time: fixedTime}
	if len(cfg.Config.Cmd) == 0 {
		cfg.Config.Cmd = []string{"sh"}
	}
	if edit != nil {
		edit(&cfg.Config)
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		t.Fatal(err)
	}
	return img
}

// busybox is the test image, for images that must run.
func busybox(t testing.TB, path string) v1.Image {
	t.Helper()
	tag, err := name.NewTag("busybox:latest")
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func writeDocker(t testing.TB, p, ref string, img v1.Image) {
	t.Helper()
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := tarball.WriteToFile(p, tag, img); err != nil {
		t.Fatal(err)
	}
}

func writeLayoutDir(t testing.TB, dir, ref string, img v1.Image) {
	t.Helper()
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref})); err != nil {
		t.Fatal(err)
	}
}

// tarDir writes the tree at dir into the tar p, as skopeo's oci-archive does,
// followed by extra entries.
func tarDir(t testing.TB, dir, p string, extra ...entry) {
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
	if err := tw.Flush(); err != nil {
		t.Fatal(err)
	}
	if len(extra) > 0 {
		// tarOf's output ends in the two zero blocks that end a tar.
		if _, err := f.Write(tarOf(t, extra)); err != nil {
			t.Fatal(err)
		}
		return
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

func writeTar(t testing.TB, p string, entries []entry) {
	t.Helper()
	if err := os.WriteFile(p, tarOf(t, entries), 0o644); err != nil {
		t.Fatal(err)
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// handDocker is a docker-archive made by hand, so that its manifest.json, config
// and layer names and digests can lie. Layers are uncompressed tars.
type handDocker struct {
	config     []byte
	configName string // default <sha of config>.json
	layers     []handLayer
	repoTag    string
	extra      []entry // more tar entries, after the others
}

type handLayer struct {
	name string // path in the archive and in manifest.json; default <sha>/layer.tar
	file string // path in the archive, when it differs from name
	data []byte
}

// configFor is an image config naming diffIDs as its layers.
func configFor(t testing.TB, diffIDs ...string) []byte {
	t.Helper()
	cfg := v1.ConfigFile{
		Architecture: runtime.GOARCH, OS: "linux", Created: v1.Time{Time: fixedTime},
		Config: v1.Config{Cmd: []string{"sh"}},
		RootFS: v1.RootFS{Type: "layers"},
	}
	for _, d := range diffIDs {
		h, err := v1.NewHash(d)
		if err != nil {
			t.Fatal(err)
		}
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, h)
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (h handDocker) write(t testing.TB, p string) {
	t.Helper()
	cfgName := h.configName
	if cfgName == "" {
		cfgName = sha(h.config) + ".json"
	}
	tag := h.repoTag
	if tag == "" {
		tag = "hostile:v1"
	}
	entries := []entry{{name: cfgName, body: string(h.config)}}
	var names []string
	for _, l := range h.layers {
		n := l.name
		if n == "" {
			n = sha(l.data) + "/layer.tar"
		}
		names = append(names, n)
		file := l.file
		if file == "" {
			file = n
		}
		entries = append(entries, entry{name: file, body: string(l.data)})
	}
	m, err := json.Marshal([]map[string]any{{"Config": cfgName, "RepoTags": []string{tag}, "Layers": names}})
	if err != nil {
		t.Fatal(err)
	}
	entries = append(entries, entry{name: "manifest.json", body: string(m)})
	entries = append(entries, h.extra...)
	writeTar(t, p, entries)
}

// dockerWithLayer is a hand-made docker-archive of one image whose only layer
// is the tar of entries, with honest digests.
func dockerWithLayer(t testing.TB, p string, entries []entry) {
	t.Helper()
	data := tarOf(t, entries)
	handDocker{config: configFor(t, "sha256:"+sha(data)), layers: []handLayer{{data: data}}}.write(t, p)
}

// readJSON and writeJSON edit files of an OCI layout.
func readJSON(t testing.TB, p string, v any) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func writeJSON(t testing.TB, p string, v any) {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func blobPath(dir string, h v1.Hash) string {
	return filepath.Join(dir, "blobs", h.Algorithm, h.Hex)
}
