package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"

	"github.com/staticpodd/staticpodd/oci/image/policy"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

const testDigest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// The signatures kept for a digest: each once, the newest arrival's first,
// at most policy.MaxSignatures of each kind; an oversized or foreign file is
// an error, not signatures.
func TestKeepSignatures(t *testing.T) {
	s := openStore(t)
	sig := func(kind string, i int) policy.Signature {
		return policy.Signature{Kind: kind, Payload: fmt.Appendf(nil, "payload %d", i), Signature: fmt.Appendf(nil, "sig %d", i)}
	}
	var first []policy.Signature
	for i := range policy.MaxSignatures + 5 {
		first = append(first, sig(policy.KindCosign, i))
	}
	if err := s.keepSignatures(testDigest, first); err != nil {
		t.Fatal(err)
	}
	got, err := s.readSignatures(testDigest)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != policy.MaxSignatures {
		t.Fatalf("kept %d signatures, want %d", len(got), policy.MaxSignatures)
	}
	// Again, with one new of each kind: the new first, nothing twice.
	if err := s.keepSignatures(testDigest, []policy.Signature{sig(policy.KindBundle, 100), first[0]}); err != nil {
		t.Fatal(err)
	}
	got, err = s.readSignatures(testDigest)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != policy.MaxSignatures+1 || got[0].Kind != policy.KindBundle || string(got[1].Payload) != "payload 0" {
		t.Errorf("kept %d signatures, first %q %q", len(got), got[0].Kind, got[1].Payload)
	}

	other := "sha256:" + strings.Repeat("ab", 32)
	if err := os.WriteFile(s.signaturesPath(other), []byte(`{"digest": "`+testDigest+`", "signatures": []}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.readSignatures(other); err == nil || !strings.Contains(err.Error(), "file is for") {
		t.Errorf("a file for another digest: %v", err)
	}
	huge := make([]byte, maxSignatureFile+1)
	if err := os.WriteFile(s.signaturesPath(other), huge, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.readSignatures(other); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Errorf("an oversized file: %v", err)
	}
	if _, err := s.readSignatures("sha256:../../etc/passwd"); err == nil {
		t.Error("a digest that is a path was read")
	}

	// Signatures no image's digest names go with the next index write;
	// files the store did not make stay.
	foreign := filepath.Join(s.signaturesDir(), "README")
	if err := os.WriteFile(foreign, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.writeIndexLocked(index{Images: []Image{{ID: testDigest, Digest: testDigest}}}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]bool{s.signaturesPath(testDigest): true, s.signaturesPath(other): false, foreign: true} {
		if _, err := os.Stat(p); (err == nil) != want {
			t.Errorf("%s: present = %v, want %v", p, err == nil, want)
		}
	}
}

// An index naming a manifest digest that is not one is refused, so that no
// signatures path is made of it.
func TestIndexRefusesBadManifestDigest(t *testing.T) {
	s := openStore(t)
	if err := os.WriteFile(s.indexPath(), []byte(`{"images": [{"ID": "`+testDigest+`", "Digest": "sha256:../../x"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.List(); err == nil || !strings.Contains(err.Error(), "manifest") {
		t.Errorf("List: %v", err)
	}
}

// A layer blob of an OCI layout replaced after its manifest was made (and
// signed) is refused even with no policy, and even when it unpacks: its
// digest is not the one the manifest names. The store is left as it was.
func TestImportRefusesTamperedLayoutBlob(t *testing.T) {
	testroot.Require(t)
	dir := t.TempDir()
	writeSignedLayout(t, dir, "registry.example/app:v1", testImage(t), signing{tamper: true})
	archive := filepath.Join(t.TempDir(), "tampered.tar")
	tarDir(t, dir, archive)
	s := openStore(t)
	before := treeDigest(t, s.Root())
	for _, p := range []string{archive, dir} {
		_, err := s.Import(context.Background(), p)
		if err == nil || !strings.Contains(err.Error(), "layer blob") || !strings.Contains(err.Error(), "corrupt archive") {
			t.Errorf("import %s: %v, want the layer blob's digest refused", p, err)
		}
	}
	if after := treeDigest(t, s.Root()); after != before {
		t.Errorf("store changed:\n%s\nwant\n%s", after, before)
	}
}

// An image imported from an OCI layout is recorded with the manifest digest
// the layout names it by; for a multi-platform image, the index's, which must
// have that digest: it is what a signature is over.
func TestImportLayoutDigest(t *testing.T) {
	testroot.Require(t)
	img := testImage(t)
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeLayout(t, dir, map[string]v1.Image{"registry.example/app:v1": img})
	s := openStore(t)
	imgs, err := s.Import(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if imgs[0].Digest != want.String() || imgs[0].Transport != policy.TransportOCIArchive || imgs[0].Verification == nil {
		t.Errorf("recorded digest %q transport %q verification %+v, want %s", imgs[0].Digest, imgs[0].Transport, imgs[0].Verification, want)
	}

	ii := mutate.AppendManifests(empty.Index, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: runtime.GOARCH}}})
	idxDigest, err := ii.Digest()
	if err != nil {
		t.Fatal(err)
	}
	multi := t.TempDir()
	lp, err := layout.Write(multi, empty.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendIndex(ii, layout.WithAnnotations(map[string]string{annotationRefName: "registry.example/multi:v1"})); err != nil {
		t.Fatal(err)
	}
	imgs, err = s.Import(context.Background(), multi)
	if err != nil {
		t.Fatal(err)
	}
	if imgs[0].Digest != idxDigest.String() {
		t.Errorf("multi-platform image recorded with digest %q, want the index's %s", imgs[0].Digest, idxDigest)
	}
	// The index's bytes changed, its name not.
	blob := filepath.Join(multi, "blobs", "sha256", idxDigest.Hex)
	raw, err := os.ReadFile(blob)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(blob, append(raw, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("registry.example/multi:v1"); err != nil {
		t.Fatal(err)
	}
	before := treeDigest(t, s.Root())
	if _, err := s.Import(context.Background(), multi); err == nil || !strings.Contains(err.Error(), "corrupt archive") {
		t.Errorf("import of a changed index: %v", err)
	}
	if after := treeDigest(t, s.Root()); after != before {
		t.Errorf("store changed:\n%s\nwant\n%s", after, before)
	}
}
