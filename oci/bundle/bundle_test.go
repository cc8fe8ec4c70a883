package bundle

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/staticpodd/staticpodd/oci/image"
	"github.com/staticpodd/staticpodd/oci/image/policy"
	"github.com/staticpodd/staticpodd/oci/image/policy/sign"
)

// key is a signing key and the policy requiring it, in a dir of its own.
type key struct {
	signer  *sign.Signer
	pubPath string
}

func newKey(t *testing.T) key {
	t.Helper()
	dir := t.TempDir()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	priv := filepath.Join(dir, "cosign.key")
	if err := os.WriteFile(priv, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := sign.Load(priv, nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := s.PublicKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	pubPath := filepath.Join(dir, "cosign.pub")
	if err := os.WriteFile(pubPath, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return key{signer: s, pubPath: pubPath}
}

// requiring is a policy that every image and bundle be signed by k.
func requiring(t *testing.T, k key) *policy.Policy {
	t.Helper()
	req := fmt.Sprintf(`[{"type":"sigstoreSigned","keyPath":%q}]`, k.pubPath)
	p, err := policy.Parse([]byte(`{"default":[{"type":"reject"}],"transports":{
		"oci-archive":{"":`+req+`},"docker":{"":`+req+`}}}`), "policy.json")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// signedArchive writes an OCI layout dir holding a random image for each
// ref, each signed by k (tag scheme), and returns the images by ref.
func signedArchive(t *testing.T, k key, refs ...string) (string, map[string]v1.Image) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "images")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	imgs := map[string]v1.Image{}
	for _, ref := range refs {
		img, err := random.Image(512, 2)
		if err != nil {
			t.Fatal(err)
		}
		norm, _ := image.Normalize(ref)
		if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{imagespec.AnnotationRefName: norm})); err != nil {
			t.Fatal(err)
		}
		imgs[ref] = img
	}
	if _, err := SignArchive(context.Background(), dir, k.signer, SignOptions{}); err != nil {
		t.Fatal(err)
	}
	return dir, imgs
}

func digestOf(t *testing.T, img v1.Image) string {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

func openStore(t *testing.T, root string, pol *policy.Policy) *image.Store {
	t.Helper()
	// No reserve: the machine the tests run on may be fuller than 15%.
	s, err := image.Open(filepath.Join(root, "images"), slog.New(slog.NewTextHandler(io.Discard, nil)), image.WithReserve(0))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPolicy(pol); err != nil {
		t.Fatal(err)
	}
	return s
}

// create writes a bundle of files and images to a file and returns its path.
func create(t *testing.T, k key, bundleName string, files map[string][]byte, images []string, sources ...string) (string, *Created) {
	t.Helper()
	c, err := Create(context.Background(), t.TempDir(), CreateOptions{Name: bundleName, Files: files, Images: images,
		Sources: sources, Signer: k.signer})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	out := filepath.Join(t.TempDir(), bundleName+".tar")
	f, err := os.Create(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WriteTo(f, true); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return out, c
}

var podYAML = []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\nspec:\n  containers:\n  - name: web\n    image: example.com/web:1\n")

// TestRoundTrip creates a bundle from an archive and a registry, then
// applies it on another root dir with the registry gone: the record, the
// manifests and the images, pinned, are the ones signed.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	k := newKey(t)
	archive, imgs := signedArchive(t, k, "example.com/web:1")

	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true)))
	host := strings.TrimPrefix(srv.URL, "http://")
	side, err := random.Image(512, 1)
	if err != nil {
		t.Fatal(err)
	}
	sideRef := host + "/tools/side:2"
	pushSigned(t, k, sideRef, side)

	files := map[string][]byte{"web.yaml": podYAML, "side.yaml": []byte("# side\n")}
	path, c := create(t, k, "edge", files, []string{"example.com/web:1", sideRef}, archive, sideRef)
	srv.Close() // apply is offline

	root := t.TempDir()
	pol := requiring(t, k)
	store := openStore(t, root, pol)
	rec, err := Apply(ctx, store, pol, path, root, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Digest != c.Digest || rec.Name != "edge" || !strings.HasPrefix(rec.Signer, "verified by ") {
		t.Errorf("record %+v, want edge %s verified", rec, c.Digest)
	}
	want := map[string]string{"example.com/web:1": digestOf(t, imgs["example.com/web:1"]), sideRef: digestOf(t, side)}
	if len(rec.Images) != 2 {
		t.Fatalf("images %+v, want 2", rec.Images)
	}
	for _, i := range rec.Images {
		if want[i.Ref] != i.Digest {
			t.Errorf("image %s: digest %s, want the signed %s", i.Ref, i.Digest, want[i.Ref])
		}
		got, err := store.Get(i.Ref)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Pinned || got.ID != i.ID || got.Digest != i.Digest || got.Verification == nil || got.Verification.Decision != policy.Verified {
			t.Errorf("store has %s as %+v, want pinned %s from %s", i.Ref, got, i.ID, i.Digest)
		}
	}
	st, err := ReadState(root)
	if err != nil {
		t.Fatal(err)
	}
	if st.Current != Hex(c.Digest) || st.Previous != "" || st.Trial.IsZero() {
		t.Errorf("state %+v, want current %s on trial", st, Hex(c.Digest))
	}
	for n, data := range files {
		got, err := os.ReadFile(filepath.Join(ManifestsDir(root, st.Current), n))
		if err != nil || !bytes.Equal(got, data) {
			t.Errorf("manifest %s: %q, %v", n, got, err)
		}
	}
	if r, err := ReadRecord(root, st.Current); err != nil || r.Digest != rec.Digest {
		t.Errorf("record on disk %+v, %v", r, err)
	}
}

// pushSigned pushes img to ref with a sigstore bundle referrer by k.
func pushSigned(t *testing.T, k key, ref string, img v1.Image) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
	d := digestOf(t, img)
	sig, err := k.signer.Bundle(d)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := img.RawManifest()
	mt, _ := img.MediaType()
	h, _ := v1.NewHash(d)
	art, err := policy.BundleArtifact(sig.Payload, v1.Descriptor{MediaType: mt, Digest: h, Size: int64(len(raw))})
	if err != nil {
		t.Fatal(err)
	}
	ad, _ := art.Digest()
	if err := remote.Write(r.Context().Digest(ad.String()), art); err != nil {
		t.Fatal(err)
	}
}

// TestSecondReplacesFirst applies three bundles: each replaces the one
// before, which stays as Previous; the one two back is released.
func TestSecondReplacesFirst(t *testing.T) {
	ctx := context.Background()
	k := newKey(t)
	pol := requiring(t, k)
	root := t.TempDir()
	store := openStore(t, root, pol)
	var recs []Record
	for i, ref := range []string{"example.com/a:1", "example.com/b:1", "example.com/c:1"} {
		archive, _ := signedArchive(t, k, ref)
		path, _ := create(t, k, fmt.Sprintf("gen%d", i), map[string][]byte{"pod.yaml": []byte(ref)}, []string{ref}, archive)
		rec, err := Apply(ctx, store, pol, path, root, ApplyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	st, err := ReadState(root)
	if err != nil {
		t.Fatal(err)
	}
	if st.Current != Hex(recs[2].Digest) || st.Previous != Hex(recs[1].Digest) {
		t.Errorf("state %+v, want current %s previous %s", st, recs[2].Digest, recs[1].Digest)
	}
	if _, err := os.Stat(RecordDir(root, Hex(recs[0].Digest))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the first bundle's record is still there: %v", err)
	}
	for i, rec := range recs {
		img, err := store.Get(rec.Images[0].Ref)
		if err != nil {
			t.Fatal(err)
		}
		if img.Pinned != (i > 0) {
			t.Errorf("bundle %d's image pinned %v, want %v", i, img.Pinned, i > 0)
		}
	}
	// Applied again, the current bundle changes nothing.
	path, _ := create(t, k, "gen2", map[string][]byte{"pod.yaml": []byte("example.com/c:1")}, nil)
	if _, err := Apply(ctx, store, pol, path, root, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
}

// snapshot is what a refused bundle must leave as it was.
func snapshot(t *testing.T, store *image.Store, root string) string {
	t.Helper()
	imgs, err := store.List()
	if err != nil {
		t.Fatal(err)
	}
	st, err := ReadState(root)
	if err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir(Dir(root))
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	b, _ := json.Marshal(struct {
		Images []image.Image
		State  State
		Dirs   []string
	}{imgs, st, names})
	return string(b)
}

// TestRefusedWhole refuses bad bundles, each with the store, state.json and
// bundles/ as they were.
func TestRefusedWhole(t *testing.T) {
	ctx := context.Background()
	k, other := newKey(t), newKey(t)
	pol := requiring(t, k)
	archive, _ := signedArchive(t, k, "example.com/web:1")
	good := func(t *testing.T, signer key) (string, *Created) {
		return create(t, signer, "edge", map[string][]byte{"web.yaml": podYAML}, []string{"example.com/web:1"}, archive)
	}
	for _, tc := range []struct {
		name string
		make func(t *testing.T) string
		opts ApplyOptions
		want string
	}{
		{name: "other key", make: func(t *testing.T) string { p, _ := good(t, other); return p }, want: "SignatureValidationFailed"},
		{name: "unsigned", make: func(t *testing.T) string {
			_, c := good(t, k)
			return rewrite(t, c, func(dir string, idx *v1.IndexManifest) {
				idx.Manifests = slices.DeleteFunc(idx.Manifests, func(d v1.Descriptor) bool {
					return d.ArtifactType == policy.ArtifactTypeBundle && d.Digest.String() != c.Digest
				})
			})
		}, want: "SignatureValidationFailed"},
		{name: "tampered layer", make: func(t *testing.T) string {
			_, c := good(t, k)
			return rewrite(t, c, func(dir string, idx *v1.IndexManifest) {
				m, err := readManifest(dir, c.Metadata.Images[0].Digest)
				if err != nil {
					t.Fatal(err)
				}
				flip(t, filepath.Join(dir, "blobs", "sha256", m.Layers[0].Digest.Hex))
			})
		}, want: "tampered or corrupt"},
		{name: "tampered manifest file", make: func(t *testing.T) string {
			_, c := good(t, k)
			return rewrite(t, c, func(dir string, idx *v1.IndexManifest) {
				m, err := readManifest(dir, c.Digest)
				if err != nil {
					t.Fatal(err)
				}
				flip(t, filepath.Join(dir, "blobs", "sha256", m.Layers[0].Digest.Hex))
			})
		}, want: "tampered or corrupt"},
		{name: "tampered manifest file, hashes rewritten", make: func(t *testing.T) string {
			_, c := good(t, k)
			return rewrite(t, c, func(dir string, idx *v1.IndexManifest) {
				md := c.Metadata
				md.Manifests = nil
				layer, err := manifestsTar(map[string][]byte{"web.yaml": []byte("evil")}, &md)
				if err != nil {
					t.Fatal(err)
				}
				cfg, _ := json.Marshal(md)
				m, err := readManifest(dir, c.Digest)
				if err != nil {
					t.Fatal(err)
				}
				m.Config, m.Layers[0] = blobDescriptor(MediaTypeMetadata, cfg), blobDescriptor(MediaTypeManifests, layer)
				raw, _ := json.Marshal(m)
				desc := blobDescriptor(m.MediaType, raw)
				for _, b := range [][]byte{cfg, layer, raw} {
					os.WriteFile(filepath.Join(dir, "blobs", "sha256", blobDescriptor("", b).Digest.Hex), b, 0o600)
				}
				for i := range idx.Manifests {
					if idx.Manifests[i].Digest.String() == c.Digest {
						idx.Manifests[i].Digest, idx.Manifests[i].Size = desc.Digest, desc.Size
					}
				}
			})
		}, want: "SignatureValidationFailed"},
		{name: "image signed by another key", make: func(t *testing.T) string {
			otherArchive, _ := signedArchive(t, other, "example.com/web:1")
			p, _ := create(t, k, "edge", map[string][]byte{"web.yaml": podYAML}, []string{"example.com/web:1"}, otherArchive)
			return p
		}, want: "SignatureValidationFailed"},
		{name: "path traversal", make: func(t *testing.T) string {
			_, c := good(t, k)
			return rewrite(t, c, func(dir string, idx *v1.IndexManifest) {
				if err := os.WriteFile(filepath.Join(dir, "..", "escape"), []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
			}, "../escape")
		}, want: "not part of an OCI layout"},
		{name: "oversize", make: func(t *testing.T) string { p, _ := good(t, k); return p }, opts: ApplyOptions{MaxBytes: 4096}, want: "more than 4096 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			store := openStore(t, root, pol)
			path := tc.make(t)
			before := snapshot(t, store, root)
			_, err := Apply(ctx, store, pol, path, root, tc.opts)
			t.Log(err)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("apply: %v, want an error with %q", err, tc.want)
			}
			if after := snapshot(t, store, root); after != before {
				t.Errorf("refused, but changed:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

// rewrite copies c's layout, lets edit change it and its index, and tars it
// (with extra names, each a file of the copy relative to its root, as they are).
func rewrite(t *testing.T, c *Created, edit func(dir string, idx *v1.IndexManifest), extra ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "l", "layout")
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"oci-layout", "index.json"} {
		copyFile(t, filepath.Join(c.Layout, n), filepath.Join(dir, n))
	}
	ents, _ := os.ReadDir(filepath.Join(c.Layout, "blobs", "sha256"))
	for _, e := range ents {
		copyFile(t, filepath.Join(c.Layout, "blobs", "sha256", e.Name()), filepath.Join(dir, "blobs", "sha256", e.Name()))
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	var idx v1.IndexManifest
	if err := json.Unmarshal(raw, &idx); err != nil {
		t.Fatal(err)
	}
	edit(dir, &idx)
	raw, _ = json.Marshal(idx)
	if err := os.WriteFile(filepath.Join(dir, "index.json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bad.tar")
	var buf bytes.Buffer
	if err := writeLayoutTar(dir, &buf, false); err != nil {
		t.Fatal(err)
	}
	if len(extra) > 0 {
		buf = appendEntries(t, buf.Bytes(), dir, extra)
	}
	if err := os.WriteFile(out, buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	return out
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

func flip(t *testing.T, p string) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestApplyFromRegistryAndURL applies one bundle pushed to a registry, by
// its reference, and served over HTTP, by its URL: the same bundle, the
// same images, judged under the docker and oci-archive transports.
func TestApplyFromRegistryAndURL(t *testing.T) {
	ctx := context.Background()
	k := newKey(t)
	pol := requiring(t, k)
	archive, imgs := signedArchive(t, k, "example.com/web:1")
	path, c := create(t, k, "edge", map[string][]byte{"web.yaml": podYAML}, []string{"example.com/web:1"}, archive)

	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithReferrersSupport(true)))
	defer reg.Close()
	ref, err := name.ParseReference(strings.TrimPrefix(reg.URL, "http://") + "/bundles/edge:v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Push(ctx, ref); err != nil {
		t.Fatal(err)
	}
	files := httptest.NewServer(http.FileServer(http.Dir(filepath.Dir(path))))
	defer files.Close()

	for _, src := range []string{ref.String(), files.URL + "/" + filepath.Base(path)} {
		root := t.TempDir()
		store := openStore(t, root, pol)
		rec, err := Apply(ctx, store, pol, src, root, ApplyOptions{})
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		want := digestOf(t, imgs["example.com/web:1"])
		if rec.Digest != c.Digest || len(rec.Images) != 1 || rec.Images[0].Digest != want {
			t.Errorf("%s: record %+v, want bundle %s with image %s", src, rec, c.Digest, want)
		}
		if img, err := store.Get("example.com/web:1"); err != nil || !img.Pinned || img.Digest != want {
			t.Errorf("%s: store has %+v, %v", src, img, err)
		}
	}

	// A reference to something else than a bundle is refused, store unchanged.
	root := t.TempDir()
	store := openStore(t, root, pol)
	before := snapshot(t, store, root)
	notBundle, _ := random.Image(64, 1)
	other := ref.Context().Tag("image")
	if err := remote.Write(other, notBundle); err != nil {
		t.Fatal(err)
	}
	if _, err := Apply(ctx, store, pol, other.String(), root, ApplyOptions{}); err == nil || !strings.Contains(err.Error(), "not a bundle") {
		t.Errorf("apply of an image: %v, want not a bundle", err)
	}
	if after := snapshot(t, store, root); after != before {
		t.Errorf("refused, but changed:\n%s\nwas\n%s", after, before)
	}
}

// TestTwoNamesOneImage applies a bundle whose manifests name one image
// two ways: both names are the image's, pinned, its signatures read once.
func TestTwoNamesOneImage(t *testing.T) {
	ctx := context.Background()
	k := newKey(t)
	pol := requiring(t, k)
	dir, imgs := signedArchive(t, k, "example.com/web:1")
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(imgs["example.com/web:1"], layout.WithAnnotations(map[string]string{imagespec.AnnotationRefName: "example.com/web:stable"})); err != nil {
		t.Fatal(err)
	}
	if _, err := SignArchive(ctx, dir, k.signer, SignOptions{Identity: "example.com/web:stable"}); err != nil {
		t.Fatal(err)
	}
	path, _ := create(t, k, "edge", map[string][]byte{"web.yaml": podYAML}, []string{"example.com/web:1", "example.com/web:stable"}, dir)
	root := t.TempDir()
	store := openStore(t, root, pol)
	rec, err := Apply(ctx, store, pol, path, root, ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(rec.Images) != 2 || rec.Images[0].ID != rec.Images[1].ID || rec.Images[0].Digest != rec.Images[1].Digest {
		t.Fatalf("images %+v, want one image by two names", rec.Images)
	}
	img, err := store.Get("example.com/web:stable")
	if err != nil || !img.Pinned || len(img.Refs) != 2 {
		t.Errorf("store has %+v, %v", img, err)
	}
}

// TestSignArchiveBundle signs a tarred archive with sigstore bundle
// referrers (images sign --bundle -o OUT): the signed copy's image is
// verified through its referrer; the archive signed is left as it was.
func TestSignArchiveBundle(t *testing.T) {
	ctx := context.Background()
	k := newKey(t)
	pol := requiring(t, k)
	dir := filepath.Join(t.TempDir(), "images")
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	img, _ := random.Image(256, 1)
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{"io.containerd.image.name": "example.com/web:1"})); err != nil {
		t.Fatal(err)
	}
	in, out := filepath.Join(t.TempDir(), "in.tar"), filepath.Join(t.TempDir(), "out.tar")
	f, err := os.Create(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeLayoutTar(dir, f, true); err != nil {
		t.Fatal(err)
	}
	f.Close()
	before, _ := os.ReadFile(in)
	signed, err := SignArchive(ctx, in, k.signer, SignOptions{Bundle: true, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(signed) != 1 || signed[0].Digest != digestOf(t, img) || !strings.HasPrefix(signed[0].Source, "referrer sha256:") {
		t.Fatalf("signed %+v", signed)
	}
	if after, _ := os.ReadFile(in); !bytes.Equal(before, after) {
		t.Error("the archive signed into another file changed")
	}
	path, _ := create(t, k, "edge", map[string][]byte{"web.yaml": podYAML}, []string{"example.com/web:1"}, out)
	root := t.TempDir()
	store := openStore(t, root, pol)
	if _, err := Apply(ctx, store, pol, path, root, ApplyOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := store.Get("example.com/web:1")
	if err != nil || got.Verification == nil || got.Verification.Decision != policy.Verified {
		t.Errorf("store has %+v, %v", got, err)
	}
}
