package image

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

func TestNormalize(t *testing.T) {
	digest := "sha256:" + "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct{ in, want string }{
		{"nginx", "docker.io/library/nginx:latest"},
		{"nginx:1.27", "docker.io/library/nginx:1.27"},
		{"docker.io/nginx", "docker.io/library/nginx:latest"},
		{"index.docker.io/library/nginx:1", "docker.io/library/nginx:1"},
		{"user/app", "docker.io/user/app:latest"},
		{"localhost:5000/a/b", "localhost:5000/a/b:latest"},
		{"quay.io/x/y@" + digest, "quay.io/x/y@" + digest},
	}
	for _, tt := range tests {
		got, err := Normalize(tt.in)
		if err != nil {
			t.Errorf("Normalize(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Normalize(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	for _, bad := range []string{"", "UPPER/case", "a b", "x@sha256:short"} {
		if got, err := Normalize(bad); err == nil {
			t.Errorf("Normalize(%q) = %q, want an error", bad, got)
		}
	}
}

// An archive naming an image with a reference docker's grammar refuses is not
// imported, in any format, and the error names where the reference came from.
func TestImportRefusesInvalidReferences(t *testing.T) {
	testroot.Require(t)
	h := newHostileSetup(t)
	img := testImage(t, baseEntries)
	cases := []struct {
		name  string
		write func(t *testing.T, p string)
		where string
	}{
		{"RepoTags", func(t *testing.T, p string) {
			config, err := img.RawConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			dockerArchive{ref: "../../etc:x", config: config, blobs: [][]byte{layerTar(t, baseEntries)}}.write(t, p)
		}, "docker-archive manifest.json image 0: RepoTags[0]: "},
		{"ref.name", func(t *testing.T, p string) {
			writeOCIArchive(t, p, map[string]v1.Image{"../../etc:x": img})
		}, "index.json manifests[0]: annotation org.opencontainers.image.ref.name: "},
		{"containerd name", func(t *testing.T, p string) {
			dir := t.TempDir()
			lp, err := layout.Write(dir, empty.Index)
			if err != nil {
				t.Fatal(err)
			}
			if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"io.containerd.image.name": "docker.io/library/../../etc:x"})); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(dir, p); err != nil {
				t.Fatal(err)
			}
		}, "index.json manifests[0]: annotation io.containerd.image.name: "},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "refs")
			c.write(t, p)
			_, err := h.s.Import(context.Background(), p)
			if err == nil {
				t.Fatal("import succeeded")
			}
			for _, want := range []string{p, c.where, "invalid image reference", `".."`} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			h.unchanged(t)
		})
	}
}

// Get and Remove say why a reference is invalid instead of "not present", and
// still find images by ID.
func TestStoreRefusesInvalidReferences(t *testing.T) {
	testroot.Require(t)
	h := newHostileSetup(t)
	for _, ref := range []string{"../../etc:x", "UPPER/case", "x:-bad"} {
		if _, err := h.s.Get(ref); err == nil || errors.Is(err, podspec.ErrImageNotPresent) || !strings.Contains(err.Error(), "invalid image reference") {
			t.Errorf("Get(%q): %v, want an invalid reference error", ref, err)
		}
		if err := h.s.Remove(ref); err == nil || !strings.Contains(err.Error(), "invalid image reference") {
			t.Errorf("Remove(%q): %v, want an invalid reference error", ref, err)
		}
	}
	h.unchanged(t)
	img, err := h.s.Get("good:v1")
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{img.ID, digestHex(img.ID), digestHex(img.ID)[:12]} {
		if got, err := h.s.Get(id); err != nil || got.ID != img.ID {
			t.Errorf("Get(%q) = %s, %v", id, got.ID, err)
		}
	}
	if _, err := h.s.Get("docker.io/library/nope:v1"); !errors.Is(err, podspec.ErrImageNotPresent) {
		t.Errorf("Get of a missing image: %v, want ErrImageNotPresent", err)
	}
}

// An index or snapshot record naming a layer by something other than a sha256
// digest is refused before any path is made of it.
func TestStoreRefusesInvalidDigests(t *testing.T) {
	testroot.Require(t)
	h := newHostileSetup(t)
	bad := "sha256:../../../outside"
	raw, err := os.ReadFile(h.s.indexPath())
	if err != nil {
		t.Fatal(err)
	}
	var idx index
	if err := json.Unmarshal(raw, &idx); err != nil {
		t.Fatal(err)
	}
	idx.Images[0].Layers = append(idx.Images[0].Layers, bad)
	tampered, err := json.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.s.indexPath(), tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.s.Prepare("c1", "good:v1"); err == nil || !strings.Contains(err.Error(), `invalid digest "sha256:../../../outside"`) {
		t.Errorf("Prepare over a tampered index: %v", err)
	}
	if err := os.WriteFile(h.s.indexPath(), raw, 0o600); err != nil {
		t.Fatal(err)
	}

	dir := h.s.snapshotDir("c2")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	meta, err := json.Marshal(snapshotMeta{Image: idx.Images[0].ID, Layers: []string{bad}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "meta.json"), meta, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.s.Prepare("c2", "good:v1"); err == nil || !strings.Contains(err.Error(), "invalid digest") {
		t.Errorf("Prepare over a tampered snapshot record: %v", err)
	}
	if got := treeDigest(t, h.outside); got != h.outsideWant {
		t.Errorf("outside the store changed:\n%s\nwant\n%s", got, h.outsideWant)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
}

func TestStatusRef(t *testing.T) {
	const id = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
	const dHub = "docker.io/library/nginx@sha256:2222222222222222222222222222222222222222222222222222222222222222"
	const dMirror = "reg.local:5000/team/nginx@sha256:3333333333333333333333333333333333333333333333333333333333333333"
	for _, tc := range []struct {
		digests []string
		ref     string
		want    string
	}{
		{nil, "nginx", id}, // imported: the config digest
		{[]string{dHub}, "nginx", dHub},
		{[]string{dHub}, "nginx:1.27", dHub},
		{[]string{dMirror, dHub}, "docker.io/library/nginx:latest", dHub},
		{[]string{dHub, dMirror}, "reg.local:5000/team/nginx", dMirror},
		{[]string{dHub, dMirror}, "reg.local:5000/team/nginx@" + dMirror[len(dMirror)-71:], dMirror},
		{[]string{dMirror}, "other/name", dMirror}, // no match: the first
	} {
		img := Image{ID: id, RepoDigests: tc.digests}
		if got := img.StatusRef(tc.ref); got != tc.want {
			t.Errorf("StatusRef(%q) of %v = %q, want %q", tc.ref, tc.digests, got, tc.want)
		}
	}
}
