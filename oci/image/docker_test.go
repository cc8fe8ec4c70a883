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
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

func compressBytes(t testing.TB, b []byte, how string) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch how {
	case "none":
		return b
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "zstd":
		var err error
		if w, err = zstd.NewWriter(&buf); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// dockerArchive is a docker-archive made by hand: each layer blob as given,
// under blobs/sha256/<hex>, reached through a <n>/layer.tar symlink when linked.
type dockerArchive struct {
	ref    string
	config []byte
	blobs  [][]byte
	linked bool
}

func (a dockerArchive) write(t testing.TB, p string) {
	t.Helper()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	a.writeTo(t, f)
}

func (a dockerArchive) writeTo(t testing.TB, w io.Writer) {
	t.Helper()
	tw := tar.NewWriter(w)
	add := func(hdr *tar.Header, body []byte) {
		hdr.Size, hdr.Mode, hdr.ModTime = int64(len(body)), 0o644, fixtureTime
		if hdr.Typeflag == 0 {
			hdr.Typeflag = tar.TypeReg
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	sum := sha256.Sum256(a.config)
	desc := tarball.Descriptor{Config: hex.EncodeToString(sum[:]) + ".json"}
	if a.ref != "" {
		desc.RepoTags = []string{a.ref}
	}
	add(&tar.Header{Name: desc.Config}, a.config)
	for i, b := range a.blobs {
		sum := sha256.Sum256(b)
		blob := "blobs/sha256/" + hex.EncodeToString(sum[:])
		add(&tar.Header{Name: blob}, b)
		if a.linked {
			link := fmt.Sprintf("%d/layer.tar", i)
			add(&tar.Header{Name: link, Typeflag: tar.TypeSymlink, Linkname: "../" + blob}, nil)
			blob = link
		}
		desc.Layers = append(desc.Layers, blob)
	}
	m, err := json.Marshal(tarball.Manifest{desc})
	if err != nil {
		t.Fatal(err)
	}
	add(&tar.Header{Name: "manifest.json"}, m)
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestImportDockerArchiveMixedCompression imports docker-archives whose layers
// are compressed each its own way, as tools that recompress some layers make them.
func TestImportDockerArchiveMixedCompression(t *testing.T) {
	testroot.Require(t)
	third := []entry{{name: "extra.txt", body: "extra"}}
	layers := [][]entry{baseEntries, topEntries, third}
	img := testImage(t, layers...)
	config, err := img.RawConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	for _, comps := range [][]string{
		{"none", "gzip", "zstd"},
		{"gzip", "none", "zstd"},
		{"zstd", "gzip", "none"},
		{"none", "zstd", "gzip"},
	} {
		for _, linked := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/linked=%v", strings.Join(comps, "+"), linked), func(t *testing.T) {
				a := dockerArchive{ref: "mixed:v1", config: config, linked: linked}
				for i, l := range layers {
					a.blobs = append(a.blobs, compressBytes(t, layerTar(t, l), comps[i]))
				}
				p := filepath.Join(t.TempDir(), "mixed.tar")
				a.write(t, p)
				s := openStore(t)
				if _, err := s.Import(context.Background(), p); err != nil {
					t.Fatal(err)
				}
				got, err := s.Get("mixed:v1")
				if err != nil {
					t.Fatal(err)
				}
				if len(got.Layers) != 3 {
					t.Fatalf("layers %v, want 3", got.Layers)
				}
				checkBaseLayer(t, s.layerDir(got.Layers[0]))
				checkTopLayer(t, s.layerDir(got.Layers[1]))
				if b, err := os.ReadFile(filepath.Join(s.layerDir(got.Layers[2]), "extra.txt")); err != nil || string(b) != "extra" {
					t.Errorf("extra.txt = %q, %v", b, err)
				}
			})
		}
	}
}
