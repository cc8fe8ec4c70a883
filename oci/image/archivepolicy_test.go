package image

import (
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
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/staticpodd/staticpodd/oci/image/policy"
	"github.com/staticpodd/staticpodd/oci/image/policy/sign"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// testKey is a signing key made for a test, and its public half's file.
type testKey struct {
	signer *sign.Signer
	pub    string
}

func newTestKey(t *testing.T, name string) testKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	priv := filepath.Join(dir, name+".key")
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
	tk := testKey{signer: s, pub: filepath.Join(dir, name+".pub")}
	if err := os.WriteFile(tk.pub, pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return tk
}

// archivePolicy requires the key at pub of every archive import.
func archivePolicy(t *testing.T, pub string) *policy.Policy {
	t.Helper()
	req := fmt.Sprintf(`[{"type": "sigstoreSigned", "keyPath": %q}]`, pub)
	p, err := policy.Parse([]byte(`{"default": [{"type": "reject"}], "transports": {
		"oci-archive": {"": `+req+`}, "docker-archive": {"": `+req+`}}}`), "policy.json")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// signing is how a test archive's image is signed.
type signing struct {
	key *testKey // nil: unsigned
	// form is where the layout carries the signature: "tag" (cosign's tag
	// scheme), "bundle" (a sigstore bundle referrer) or "cosign-save"
	// (cosign save's kind annotations).
	form string
	// digest is what is signed, if not the image's manifest digest.
	digest string
	// tamper replaces the image's top layer blob after signing.
	tamper bool
}

// writeSignedLayout writes an OCI layout of img named ref into dir, with the
// signature sg says, and returns the image's manifest digest.
func writeSignedLayout(t *testing.T, dir, ref string, img v1.Image, sg signing) string {
	t.Helper()
	lp, err := layout.FromPath(dir)
	if err != nil {
		if lp, err = layout.Write(dir, empty.Index); err != nil {
			t.Fatal(err)
		}
	}
	ann := map[string]string{annotationRefName: ref}
	if sg.form == "cosign-save" {
		ann[annotationCosignKind] = cosignKindImage
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(ann)); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if sg.key != nil {
		target := d.String()
		if sg.digest != "" {
			target = sg.digest
		}
		norm, err := Normalize(ref)
		if err != nil {
			t.Fatal(err)
		}
		switch sg.form {
		case "tag", "cosign-save":
			sig, err := sg.key.signer.Cosign(norm, target)
			if err != nil {
				t.Fatal(err)
			}
			si, err := policy.SignatureImage([]policy.Signature{sig})
			if err != nil {
				t.Fatal(err)
			}
			ann := map[string]string{annotationCosignKind: cosignKindSigs}
			if sg.form == "tag" {
				tag, err := policy.SignatureTag(d.String())
				if err != nil {
					t.Fatal(err)
				}
				ann = map[string]string{annotationRefName: tag}
			}
			if err := lp.AppendImage(si, layout.WithAnnotations(ann)); err != nil {
				t.Fatal(err)
			}
		case "bundle":
			sig, err := sg.key.signer.Bundle(target)
			if err != nil {
				t.Fatal(err)
			}
			desc, err := partial.Descriptor(img)
			if err != nil {
				t.Fatal(err)
			}
			art, err := policy.BundleArtifact(sig.Payload, *desc)
			if err != nil {
				t.Fatal(err)
			}
			if err := lp.AppendImage(art); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("signing form %q", sg.form)
		}
	}
	if sg.tamper {
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		top, err := layers[len(layers)-1].Digest()
		if err != nil {
			t.Fatal(err)
		}
		// Another layer, valid, that unpacks: only its digest tells.
		evil, err := layerOf(t, []entry{{name: "etc/passwd", body: "root::0:0:root:/root:/bin/sh\n"}}).Compressed()
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(evil)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "blobs", "sha256", top.Hex), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return d.String()
}

// arrival is one way an archive reaches the store: it returns the import's
// error as the user sees it.
type arrival struct {
	name string
	// imp imports the archive at p into s.
	imp func(t *testing.T, s *Store, p string) error
	// skip are the store's files that this arrival changes even when it
	// refuses (the import folder remembers a failed file).
	skip []string
}

var arrivals = []arrival{
	{name: "file", imp: func(t *testing.T, s *Store, p string) error {
		_, err := s.Import(context.Background(), p)
		return err
	}},
	{name: "stdin", imp: func(t *testing.T, s *Store, p string) error {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		_, err = s.ImportReader(context.Background(), f)
		return err
	}},
	{name: "import-folder", skip: []string{"import-state.json"}, imp: func(t *testing.T, s *Store, p string) error {
		dir := t.TempDir()
		name := filepath.Base(p)
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := s.ImportDir(context.Background(), dir); err != nil {
			t.Fatal(err)
		}
		seen, err := s.readImportState()
		if err != nil {
			t.Fatal(err)
		}
		rec, ok := seen[name]
		if !ok {
			t.Fatalf("import folder did not try %s", name)
		}
		if rec.Err != "" {
			return errors.New(rec.Err)
		}
		return nil
	}},
}

// arrivalState describes the store's files but those the arrival a changes
// even when it refuses (and so the store's directory's own mtime).
func arrivalState(t *testing.T, s *Store, a arrival) string {
	t.Helper()
	state := treeDigest(t, s.Root(), a.skip...)
	if len(a.skip) > 0 {
		_, state, _ = strings.Cut(state, "\n") // ".", the root, first
	}
	return state
}

// TestImportPolicy is the matrix of signatures × the ways an archive arrives:
// the image signed by the key (in each form an OCI layout carries), unsigned,
// signed by another key, a layer changed after signing, a signature for
// another digest. A refusal says why, and leaves the store as it was.
func TestImportPolicy(t *testing.T) {
	testroot.Require(t)
	key := newTestKey(t, "cosign")
	other := newTestKey(t, "other")
	const ref = "registry.example/app:v1"
	img := testImage(t)
	elsewhere, err := testImage(t, baseEntries).Digest()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		sg   signing
		// want is the decision, or "" for a refusal whose error says
		// wantErr.
		want    policy.Decision
		wantErr string
		// refused is a refusal by the policy (SignatureValidationFailed),
		// not a corrupt archive.
		refused bool
	}{
		{name: "signed-tag", sg: signing{key: &key, form: "tag"}, want: policy.Verified},
		{name: "signed-bundle", sg: signing{key: &key, form: "bundle"}, want: policy.Verified},
		{name: "signed-cosign-save", sg: signing{key: &key, form: "cosign-save"}, want: policy.Verified},
		{name: "unsigned", wantErr: "SignatureValidationFailed", refused: true},
		{name: "other-key", sg: signing{key: &other, form: "tag"}, wantErr: "SignatureValidationFailed", refused: true},
		{name: "tampered-layer", sg: signing{key: &key, form: "tag", tamper: true}, wantErr: "corrupt archive"},
		{name: "other-digest", sg: signing{key: &key, form: "tag", digest: elsewhere.String()}, wantErr: "SignatureValidationFailed", refused: true},
	}
	for _, tc := range cases {
		dir := t.TempDir()
		digest := writeSignedLayout(t, dir, ref, img, tc.sg)
		archive := filepath.Join(t.TempDir(), tc.name+".tar")
		tarDir(t, dir, archive)
		for _, a := range arrivals {
			t.Run(tc.name+"/"+a.name, func(t *testing.T) {
				s := openStore(t)
				// What is there already stays: an image of its own.
				if _, err := s.SetPolicy(nil); err != nil {
					t.Fatal(err)
				}
				prior := filepath.Join(t.TempDir(), "prior.tar")
				writeOCIArchive(t, prior, map[string]v1.Image{"prior:v1": testImage(t, baseEntries)})
				if _, err := s.Import(context.Background(), prior); err != nil {
					t.Fatal(err)
				}
				if _, err := s.SetPolicy(archivePolicy(t, key.pub)); err != nil {
					t.Fatal(err)
				}
				before := arrivalState(t, s, a)

				err := a.imp(t, s, archive)
				if tc.want == "" {
					if err == nil {
						t.Fatal("import succeeded")
					}
					t.Logf("error: %v", err)
					if !strings.Contains(err.Error(), tc.wantErr) {
						t.Errorf("error %q does not say %q", err, tc.wantErr)
					}
					if tc.refused && !strings.Contains(err.Error(), "registry.example/app:v1") {
						t.Errorf("error %q does not name the image", err)
					}
					if a.name != "import-folder" && tc.refused != errors.Is(err, policy.ErrSignatureValidationFailed) {
						t.Errorf("error %q: is SignatureValidationFailed = %v, want %v", err, !tc.refused, tc.refused)
					}
					if after := arrivalState(t, s, a); after != before {
						t.Errorf("store changed:\n%s\nwant\n%s", after, before)
					}
					return
				}
				if err != nil {
					t.Fatalf("import: %v", err)
				}
				got, err := s.Get(ref)
				if err != nil {
					t.Fatal(err)
				}
				if got.Digest != digest || got.Transport != policy.TransportOCIArchive {
					t.Errorf("recorded digest %q transport %q, want %q %q", got.Digest, got.Transport, digest, policy.TransportOCIArchive)
				}
				if v := got.Verification; v == nil || v.Decision != tc.want || !strings.Contains(v.By, "cosign.pub") {
					t.Errorf("verification %+v, want %s by cosign.pub", v, tc.want)
				}
				sigs, err := s.readSignatures(digest)
				if err != nil || len(sigs) == 0 {
					t.Errorf("kept signatures: %d, %v", len(sigs), err)
				}
				// The signature is not an image of its own.
				if imgs, err := s.List(); err != nil || len(imgs) != 2 {
					t.Errorf("store has %d images (%v), want prior and the import", len(imgs), err)
				}
			})
		}
	}
}

// TestImportPolicyWholeArchive: one refused image refuses an archive whole.
func TestImportPolicyWholeArchive(t *testing.T) {
	testroot.Require(t)
	key := newTestKey(t, "cosign")
	dir := t.TempDir()
	writeSignedLayout(t, dir, "registry.example/signed:v1", testImage(t), signing{key: &key, form: "tag"})
	writeSignedLayout(t, dir, "registry.example/unsigned:v1", testImage(t, baseEntries), signing{})
	archive := filepath.Join(t.TempDir(), "two.tar")
	tarDir(t, dir, archive)
	s := openStore(t)
	if _, err := s.SetPolicy(archivePolicy(t, key.pub)); err != nil {
		t.Fatal(err)
	}
	before := treeDigest(t, s.Root())
	_, err := s.Import(context.Background(), archive)
	if !errors.Is(err, policy.ErrSignatureValidationFailed) || !strings.Contains(err.Error(), "registry.example/unsigned:v1") || !strings.Contains(err.Error(), "nothing of the archive was imported") {
		t.Fatalf("import: %v, want the unsigned image refused and the archive with it", err)
	}
	if after := treeDigest(t, s.Root()); after != before {
		t.Errorf("store changed:\n%s\nwant\n%s", after, before)
	}
}

// TestImportPolicyDockerArchive: a docker-archive has nothing a signature is
// over; a policy requiring one says so.
func TestImportPolicyDockerArchive(t *testing.T) {
	testroot.Require(t)
	key := newTestKey(t, "cosign")
	archive := filepath.Join(t.TempDir(), "docker.tar")
	writeDockerArchive(t, archive, map[string]v1.Image{"registry.example/app:v1": testImage(t)})
	s := openStore(t)
	if _, err := s.SetPolicy(archivePolicy(t, key.pub)); err != nil {
		t.Fatal(err)
	}
	before := treeDigest(t, s.Root())
	_, err := s.Import(context.Background(), archive)
	if !errors.Is(err, policy.ErrSignatureValidationFailed) || !strings.Contains(err.Error(), "docker-archive carries no signatures; use an OCI archive") {
		t.Fatalf("import: %v", err)
	}
	if after := treeDigest(t, s.Root()); after != before {
		t.Errorf("store changed:\n%s\nwant\n%s", after, before)
	}
	// Accepted where the policy accepts anything, and recorded so.
	if _, err := s.SetPolicy(nil); err != nil {
		t.Fatal(err)
	}
	imgs, err := s.Import(context.Background(), archive)
	if err != nil {
		t.Fatal(err)
	}
	if v := imgs[0].Verification; v == nil || v.Decision != policy.Accepted || imgs[0].Transport != policy.TransportDockerArchive || imgs[0].Digest != "" {
		t.Errorf("recorded %+v, transport %q, digest %q", v, imgs[0].Transport, imgs[0].Digest)
	}
}

// TestImportPolicyScope: a file's scope is its absolute path (and the
// directories above it); a stream has none but the transport's default.
func TestImportPolicyScope(t *testing.T) {
	testroot.Require(t)
	key := newTestKey(t, "cosign")
	dir := t.TempDir()
	writeSignedLayout(t, dir, "registry.example/app:v1", testImage(t), signing{key: &key, form: "tag"})
	trusted := t.TempDir()
	archive := filepath.Join(trusted, "app.tar")
	tarDir(t, dir, archive)
	p, err := policy.Parse([]byte(fmt.Sprintf(`{"default": [{"type": "reject"}], "transports": {"oci-archive": {
		%q: [{"type": "sigstoreSigned", "keyPath": %q}]}}}`, trusted, key.pub)), "policy.json")
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	if _, err := s.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := s.ImportReader(context.Background(), f); !errors.Is(err, policy.ErrSignatureValidationFailed) {
		t.Errorf("import from a stream: %v, want refused (default: reject)", err)
	}
	// Through a symbolic link, the scope is still the file's.
	link := filepath.Join(t.TempDir(), "link.tar")
	if err := os.Symlink(archive, link); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Import(context.Background(), link); err != nil {
		t.Errorf("import of a file under the trusted directory: %v", err)
	}
}

// TestLayoutSignaturesHostile: an archive naming more signatures than the
// bound has only the bound read, and nothing but images is imported: not
// signature images, attestations, bundles or other referrers.
func TestLayoutSignaturesHostile(t *testing.T) {
	testroot.Require(t)
	key := newTestKey(t, "cosign")
	const ref = "registry.example/app:v1"
	img := testImage(t)
	dir := t.TempDir()
	digest := writeSignedLayout(t, dir, ref, img, signing{key: &key, form: "bundle"})
	lp, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := policy.SignatureTag(digest)
	if err != nil {
		t.Fatal(err)
	}
	for i := range policy.MaxSignatures + 8 {
		sig, err := key.signer.Cosign(fmt.Sprintf("registry.example/app:v%d", i), digest)
		if err != nil {
			t.Fatal(err)
		}
		si, err := policy.SignatureImage([]policy.Signature{sig})
		if err != nil {
			t.Fatal(err)
		}
		if err := lp.AppendImage(si, layout.WithAnnotations(map[string]string{annotationRefName: tag})); err != nil {
			t.Fatal(err)
		}
	}
	desc, err := partial.Descriptor(img)
	if err != nil {
		t.Fatal(err)
	}
	// Another referrer of the image: an SBOM.
	sbom := mutate.Subject(mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), "application/spdx+json"), *desc).(v1.Image)
	if err := lp.AppendImage(sbom); err != nil {
		t.Fatal(err)
	}
	if err := lp.AppendImage(testImage(t, baseEntries), layout.WithAnnotations(map[string]string{annotationCosignKind: cosignKindAtts})); err != nil {
		t.Fatal(err)
	}

	srcs, err := layoutImages(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(srcs) != 1 || srcs[0].admitted.img.Digest != digest {
		t.Fatalf("layout has %d images, want the one", len(srcs))
	}
	kinds := map[string]int{}
	for _, sig := range srcs[0].admitted.img.Signatures {
		kinds[sig.Kind]++
	}
	if kinds[policy.KindCosign] != policy.MaxSignatures || kinds[policy.KindBundle] != 1 {
		t.Errorf("read %v signatures, want %d cosign and 1 bundle", kinds, policy.MaxSignatures)
	}

	s := openStore(t)
	if _, err := s.SetPolicy(archivePolicy(t, key.pub)); err != nil {
		t.Fatal(err)
	}
	imgs, err := s.Import(context.Background(), dir)
	if err != nil {
		t.Fatal(err)
	}
	if all, err := s.List(); err != nil || len(imgs) != 1 || len(all) != 1 {
		t.Errorf("imported %d images, store has %d (%v): want one", len(imgs), len(all), err)
	}
	kept, err := s.readSignatures(digest)
	if err != nil || len(kept) != policy.MaxSignatures+1 {
		t.Errorf("kept %d signatures (%v), want %d", len(kept), err, policy.MaxSignatures+1)
	}
}

// TestImportLayoutDirConfigSwapped: an OCI layout directory is read in
// place, so whoever can write it can change a blob between the checks that
// admit the image (its manifest's digest, the signature over it, the config
// digest the manifest names) and the staging that records it. The config
// recorded, what the container runs (entrypoint, env, user), must be the
// one the signed manifest names, or the import fails.
func TestImportLayoutDirConfigSwapped(t *testing.T) {
	testroot.Require(t)
	key := newTestKey(t, "cosign")
	dir := t.TempDir()
	const ref = "registry.example/app:v1"
	img := testImage(t)
	writeSignedLayout(t, dir, ref, img, signing{key: &key, form: "tag"})
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	if _, err := s.SetPolicy(archivePolicy(t, key.pub)); err != nil {
		t.Fatal(err)
	}
	// importStaged's steps, with the attacker's write where it can land.
	staging, err := os.MkdirTemp(s.tmpDir(), stagingPrefix()+"import-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(staging)
	sp, err := s.newSpace()
	if err != nil {
		t.Fatal(err)
	}
	defer sp.release()
	srcs, err := openArchive(dir, staging, sp, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.admitArchived(context.Background(), archiveScope(dir), &srcs[0]); err != nil {
		t.Fatalf("the signed image is refused: %v", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	cfg = cfg.DeepCopy()
	cfg.Config.Entrypoint = []string{"/bin/evil"}
	evil, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "blobs", "sha256", m.Config.Digest.Hex), evil, 0o644); err != nil {
		t.Fatal(err)
	}
	imgs, err := s.stageAll(context.Background(), srcs, staging, sp, nil, nil)
	if err == nil {
		t.Fatalf("imported %s (config %s, entrypoint %q), not the signed manifest's config %s", imgs[0].Refs, imgs[0].ID, imgs[0].Config.Entrypoint, m.Config.Digest)
	}
	if !strings.Contains(err.Error(), "corrupt archive") {
		t.Errorf("error %q does not say the archive is corrupt", err)
	}
	if imgs, err := s.List(); err != nil || len(imgs) != 0 {
		t.Errorf("store has %d images (%v), want none", len(imgs), err)
	}
}

// TestImportFolderSymlinkScope: whoever can write the import folder decides
// what is in it, links too. A link in it to an archive elsewhere is judged
// as a file of the folder, not by the scope of where it points: a policy
// that trusts archives the operator imports by hand ("") but requires a
// signature of those dropped into the folder is not passed by a link.
func TestImportFolderSymlinkScope(t *testing.T) {
	testroot.Require(t)
	key := newTestKey(t, "cosign")
	folder := t.TempDir()
	p, err := policy.Parse([]byte(fmt.Sprintf(`{"default": [{"type": "reject"}], "transports": {"oci-archive": {
		%q: [{"type": "sigstoreSigned", "keyPath": %q}],
		"": [{"type": "insecureAcceptAnything"}]}}}`, archiveScope(folder), key.pub)), "policy.json")
	if err != nil {
		t.Fatal(err)
	}
	// Unsigned, outside the folder: where the writer of the folder can
	// also write (a temporary directory).
	unsigned := filepath.Join(t.TempDir(), "unsigned.tar")
	writeOCIArchive(t, unsigned, map[string]v1.Image{"registry.example/evil:v1": testImage(t)})
	s := openStore(t)
	if _, err := s.SetPolicy(p); err != nil {
		t.Fatal(err)
	}
	// The same archive as a file of the folder is refused...
	b, err := os.ReadFile(unsigned)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(folder, "copy.tar"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	// ...and so is a link to it.
	if err := os.Symlink(unsigned, filepath.Join(folder, "link.tar")); err != nil {
		t.Fatal(err)
	}
	before := treeDigest(t, s.Root(), "import-state.json")
	if err := s.ImportDir(context.Background(), folder); err != nil {
		t.Fatal(err)
	}
	seen, err := s.readImportState()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"copy.tar", "link.tar"} {
		rec, ok := seen[name]
		if !ok {
			t.Fatalf("import folder did not try %s", name)
		}
		if !strings.Contains(rec.Err, "SignatureValidationFailed") {
			t.Errorf("%s: imported (%v, error %q), want refused as a file of the import folder", name, rec.Images, rec.Err)
		}
	}
	if _, state, _ := strings.Cut(treeDigest(t, s.Root(), "import-state.json"), "\n"); !strings.HasSuffix(before, state) {
		t.Errorf("store changed:\n%s\nwant\n%s", state, before)
	}
}

// TestFindIDBeforeRef: the agent resolves a container's image once, to the
// ID of the image it verified, and the runtime starts that ID (Prepare). An
// ID is also a valid reference ("sha256:<hex>" is docker.io/library/sha256
// tagged <hex>): an archive naming its image so must not take the place of
// the image whose ID it spells.
func TestFindIDBeforeRef(t *testing.T) {
	testroot.Require(t)
	s := openStore(t)
	verified := filepath.Join(t.TempDir(), "verified.tar")
	writeOCIArchive(t, verified, map[string]v1.Image{"registry.example/app:v1": testImage(t)})
	imgs, err := s.Import(context.Background(), verified)
	if err != nil {
		t.Fatal(err)
	}
	id := imgs[0].ID
	other := filepath.Join(t.TempDir(), "other.tar")
	writeOCIArchive(t, other, map[string]v1.Image{id: testImage(t, baseEntries)})
	if _, err := s.Import(context.Background(), other); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != id {
		t.Errorf("Get(%s) is image %s (refs %v), not the image of that ID", id, got.ID, got.Refs)
	}
	_, img, err := s.Prepare("c1", id)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release("c1")
	if img.ID != id {
		t.Errorf("Prepare(%s) starts image %s (refs %v), not the image of that ID", id, img.ID, img.Refs)
	}
}
