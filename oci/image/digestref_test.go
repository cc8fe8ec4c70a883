package image

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// An archive's name for its image may not carry a digest that is not the
// image's: "registry.example/app@sha256:D" names the manifest D, and a pod
// pinned to it must not get another image the archive called so (an older
// one, signed, from the same repository).
func TestImportRefusesAnotherDigestsName(t *testing.T) {
	s := openStore(t)
	pinned, err := testImage(t).Digest()
	if err != nil {
		t.Fatal(err)
	}
	ref := "registry.example/app@" + pinned.String()
	p := filepath.Join(t.TempDir(), "a.tar")
	writeOCIArchive(t, p, map[string]v1.Image{ref: testImage(t, baseEntries)})
	if _, err := s.Import(context.Background(), p); err == nil || !strings.Contains(err.Error(), "not the image's") {
		t.Errorf("import of an image named %s: %v, want refused", ref, err)
	}
	if img, err := s.Get(ref); err == nil {
		t.Fatalf("%s names image %s (manifest of another digest)", ref, img.ID)
	}
}

// A docker-archive has no manifest digest: a RepoTags entry by digest
// would give its image one it is not.
func TestImportRefusesDockerArchiveNameByDigest(t *testing.T) {
	s := openStore(t)
	pinned, err := testImage(t).Digest()
	if err != nil {
		t.Fatal(err)
	}
	ref := "registry.example/app@" + pinned.String()
	dir := t.TempDir()
	p := filepath.Join(dir, "a.tar")
	writeDockerArchive(t, p, map[string]v1.Image{"registry.example/app:v1": testImage(t, baseEntries)})
	retagDockerArchive(t, p, filepath.Join(dir, "b.tar"), ref)
	if _, err := s.Import(context.Background(), filepath.Join(dir, "b.tar")); err == nil || !strings.Contains(err.Error(), "names a digest") {
		t.Errorf("import of a docker-archive image named %s: %v, want refused", ref, err)
	}
	if img, err := s.Get(ref); err == nil {
		t.Fatalf("%s names image %s, of no such manifest", ref, img.ID)
	}
}

// retagDockerArchive copies the docker-archive from to to, its one image's
// RepoTags replaced by ref.
func retagDockerArchive(t *testing.T, from, to, ref string) {
	t.Helper()
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	tr, tw := tar.NewReader(in), tar.NewWriter(out)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "manifest.json" {
			var m []map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			m[0]["RepoTags"] = []string{ref}
			if b, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
			h.Size = int64(len(b))
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
}
