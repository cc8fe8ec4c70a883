package image

import (
	"context"
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
