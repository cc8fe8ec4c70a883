package policy_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

func TestSignatureTag(t *testing.T) {
	if tag, err := policy.SignatureTag(digestA); err != nil || tag != "sha256-"+strings.Repeat("a", 64)+".sig" {
		t.Fatalf("SignatureTag = %q, %v", tag, err)
	}
	for _, d := range []string{"", "sha256:abc", "latest", "sha256:" + strings.Repeat("A", 64)} {
		if _, err := policy.SignatureTag(d); err == nil {
			t.Errorf("SignatureTag(%q) accepted", d)
		}
	}
}

// TestSignatureImage: the image cosign makes, read back through an OCI
// layout, verified.
func TestSignatureImage(t *testing.T) {
	dir := t.TempDir()
	s := newSigner(t, dir, "a.pub")
	sigs := []policy.Signature{cosign(t, s, refA, digestA), cosign(t, s, "quay.io/team/app:v2", digestA)}
	img, err := policy.SignatureImage(sigs)
	if err != nil {
		t.Fatal(err)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != types.OCIManifestSchema1 || m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 2 {
		t.Fatalf("manifest %+v", m)
	}
	for i, l := range m.Layers {
		if l.MediaType != policy.MediaTypeSimpleSigning || l.Annotations[policy.AnnotationCosignSignature] != base64.StdEncoding.EncodeToString(sigs[i].Signature) {
			t.Fatalf("layer %d: %+v", i, l)
		}
	}

	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(img); err != nil {
		t.Fatal(err)
	}
	d, _ := img.Digest()
	back, err := lp.Image(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := policy.ReadSignatureImage(back, "tag sha256-a.sig")
	if err != nil || len(got) != 2 {
		t.Fatalf("ReadSignatureImage: %d, %v", len(got), err)
	}
	if got[1].Source != "tag sha256-a.sig layer 1" || string(got[1].Payload) != string(sigs[1].Payload) || string(got[1].Signature) != string(sigs[1].Signature) {
		t.Fatalf("read back %+v", got[1])
	}
	p := signedPolicy(t, `"keyPath": "`+dir+`/a.pub"`, "")
	wantVerified(t, p.Evaluate(context.Background(), docker(refA, digestA, got...)), "key a.pub")

	// A tampered payload blob is refused by its digest, whatever the
	// source's own checks.
	blob := filepath.Join(dir, "layout", "blobs", "sha256", m.Layers[0].Digest.Hex)
	data, _ := os.ReadFile(blob)
	if err := os.WriteFile(blob, []byte(strings.Replace(string(data), "app", "apq", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := policy.ReadSignatureImage(back, "tag"); err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Fatalf("tampered blob: %v", err)
	}

	if _, err := policy.SignatureImage([]policy.Signature{bundleSig(t, s, digestA)}); err == nil {
		t.Fatal("a bundle in a signature image")
	}
}

// sigImage is a signature image built by hand, for what SignatureImage
// never makes.
func sigImage(t *testing.T, layers ...mutate.Addendum) v1.Image {
	t.Helper()
	img, err := mutate.Append(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layers...)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

func TestReadSignatureImageHostile(t *testing.T) {
	ann := map[string]string{policy.AnnotationCosignSignature: "c2ln"}
	payload := static.NewLayer([]byte(`{}`), policy.MediaTypeSimpleSigning)

	// Layers of other types are not signatures.
	img := sigImage(t, mutate.Addendum{Layer: static.NewLayer([]byte("x"), "application/octet-stream")}, mutate.Addendum{Layer: payload, Annotations: ann})
	if sigs, err := policy.ReadSignatureImage(img, "s"); err != nil || len(sigs) != 1 || string(sigs[0].Signature) != "sig" {
		t.Fatalf("mixed layers: %+v, %v", sigs, err)
	}
	for _, tc := range []struct {
		img  v1.Image
		want string
	}{
		{sigImage(t, mutate.Addendum{Layer: payload}), "no dev.cosignproject.cosign/signature annotation"},
		{sigImage(t, mutate.Addendum{Layer: payload, Annotations: map[string]string{policy.AnnotationCosignSignature: "%%"}}), "not base64"},
		{sigImage(t, mutate.Addendum{Layer: payload, Annotations: map[string]string{policy.AnnotationCosignSignature: strings.Repeat("A", 400<<10)}}), "signature larger than"},
		{sigImage(t, mutate.Addendum{Layer: static.NewLayer(make([]byte, policy.MaxSignatureBytes+1), policy.MediaTypeSimpleSigning), Annotations: ann}), "more than"},
	} {
		if _, err := policy.ReadSignatureImage(tc.img, "s"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want %q", err, tc.want)
		}
	}
	var many []mutate.Addendum
	for range policy.MaxSignatures + 1 {
		many = append(many, mutate.Addendum{Layer: payload, Annotations: ann})
	}
	if _, err := policy.ReadSignatureImage(sigImage(t, many...), "s"); err == nil || !strings.Contains(err.Error(), "more than the 32 signatures") {
		t.Fatalf("too many layers: %v", err)
	}
}

// TestBundleArtifact: the referrer cosign attaches, read back through an
// OCI layout, verified against its subject.
func TestBundleArtifact(t *testing.T) {
	dir := t.TempDir()
	s := newSigner(t, dir, "a.pub")
	subject, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := partial.Descriptor(subject)
	if err != nil {
		t.Fatal(err)
	}
	b := bundleSig(t, s, desc.Digest.String())
	art, err := policy.BundleArtifact(b.Payload, *desc)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := art.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if m.ArtifactType != policy.ArtifactTypeBundle || m.Config.MediaType != "application/vnd.oci.empty.v1+json" || m.Config.Size != 2 ||
		m.Subject == nil || m.Subject.Digest != desc.Digest || m.Subject.MediaType != desc.MediaType || m.Subject.Size != desc.Size ||
		len(m.Layers) != 1 || m.Layers[0].MediaType != policy.ArtifactTypeBundle ||
		m.Annotations["dev.sigstore.bundle.content"] != "dsse-envelope" || m.Annotations["dev.sigstore.bundle.predicateType"] != policy.CosignSignPredicateType {
		t.Fatalf("manifest %s", raw)
	}
	again, err := policy.BundleArtifact(b.Payload, *desc)
	if err != nil {
		t.Fatal(err)
	}
	d1, _ := art.Digest()
	d2, _ := again.Digest()
	if d1 != d2 {
		t.Fatal("the same bundle makes another manifest")
	}

	lp, err := layout.Write(filepath.Join(dir, "layout"), empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(art); err != nil {
		t.Fatal(err)
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := ii.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].ArtifactType != policy.ArtifactTypeBundle {
		t.Fatalf("index %+v, %v", im, err)
	}
	back, err := lp.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	got, err := policy.ReadBundleArtifact(back, "referrer")
	if err != nil || got.Kind != policy.KindBundle || string(got.Payload) != string(b.Payload) || got.Source != "referrer" {
		t.Fatalf("ReadBundleArtifact: %+v, %v", got, err)
	}
	p := signedPolicy(t, `"keyPath": "`+dir+`/a.pub"`, "")
	wantVerified(t, p.Evaluate(context.Background(), docker(refA, desc.Digest.String(), got)), "key a.pub")

	// Not a bundle's referrer.
	if _, err := policy.ReadBundleArtifact(subject, "x"); err == nil || !strings.Contains(err.Error(), "is not a sigstore bundle's") {
		t.Fatalf("an image read as a bundle: %v", err)
	}
	two, err := mutate.Append(mutate.ConfigMediaType(empty.Image, policy.ArtifactTypeBundle),
		mutate.Addendum{Layer: static.NewLayer(b.Payload, policy.ArtifactTypeBundle)},
		mutate.Addendum{Layer: static.NewLayer(b.Payload, policy.ArtifactTypeBundle)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policy.ReadBundleArtifact(two, "x"); err == nil || !strings.Contains(err.Error(), "2 layers") {
		t.Fatalf("two layers: %v", err)
	}
	big, err := mutate.Append(mutate.ConfigMediaType(empty.Image, policy.ArtifactTypeBundle),
		mutate.Addendum{Layer: static.NewLayer(make([]byte, policy.MaxSignatureBytes+1), policy.ArtifactTypeBundle)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := policy.ReadBundleArtifact(big, "x"); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("a big bundle: %v", err)
	}
	if _, err := policy.BundleArtifact(make([]byte, policy.MaxSignatureBytes+1), *desc); err == nil {
		t.Fatal("a big bundle attached")
	}
}
