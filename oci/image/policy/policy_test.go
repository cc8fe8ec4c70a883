package policy_test

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sgsign "github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/signature"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/staticpodd/staticpodd/oci/image/policy"
	"github.com/staticpodd/staticpodd/oci/image/policy/sign"
)

const (
	digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	digestB = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	refA    = "quay.io/team/app:v1"
)

// newSigner makes a P-256 key; its public half is written to dir/name.
func newSigner(t testing.TB, dir, name string) *sign.Signer {
	t.Helper()
	s, _ := newKey(t, dir, name)
	return s
}

func newKey(t testing.TB, dir, name string) (*sign.Signer, *ecdsa.PrivateKey) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sign.New(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := s.PublicKeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), pub, 0o644); err != nil {
		t.Fatal(err)
	}
	return s, k
}

func parse(t testing.TB, doc string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse([]byte(doc), "policy.json")
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	return p
}

// signedPolicy requires keys of dir for quay.io, with extra fields.
func signedPolicy(t testing.TB, keyField, extra string) *policy.Policy {
	t.Helper()
	return parse(t, `{"default": [{"type": "reject"}], "transports": {"docker": {"quay.io": [
		{"type": "sigstoreSigned", `+keyField+extra+`}]}}}`)
}

func cosign(t testing.TB, s *sign.Signer, ref, digest string) policy.Signature {
	t.Helper()
	sig, err := s.Cosign(ref, digest)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func bundleSig(t testing.TB, s *sign.Signer, digest string) policy.Signature {
	t.Helper()
	sig, err := s.Bundle(digest)
	if err != nil {
		t.Fatal(err)
	}
	return sig
}

func docker(ref, digest string, sigs ...policy.Signature) policy.Image {
	return policy.Image{Transport: policy.TransportDocker, Scope: ref, Reference: ref, Digest: digest, Signatures: sigs}
}

func wantVerified(t *testing.T, v policy.Verdict, by string) {
	t.Helper()
	if v.Decision != policy.Verified || v.By != by || v.Err() != nil {
		t.Fatalf("verdict %+v, want verified by %q", v, by)
	}
}

func wantRejected(t *testing.T, v policy.Verdict, reason string) {
	t.Helper()
	if v.Decision != policy.Rejected || !strings.Contains(v.Reason, reason) {
		t.Fatalf("verdict %+v, want rejected with %q", v, reason)
	}
	err := v.Err()
	if !errors.Is(err, policy.ErrSignatureValidationFailed) || !strings.HasPrefix(err.Error(), "SignatureValidationFailed: ") || strings.ContainsAny(err.Error(), "\n\r") {
		t.Fatalf("Err() = %q, want one line starting SignatureValidationFailed: wrapping ErrSignatureValidationFailed", err)
	}
	if len(v.Reason) > policy.MaxReason {
		t.Fatalf("reason of %d bytes", len(v.Reason))
	}
	if strings.Contains(v.Reason, "PUBLIC KEY") || strings.Contains(v.Reason, "PRIVATE KEY") {
		t.Fatalf("reason quotes a key: %s", v.Reason)
	}
}

func TestZeroPolicyRefuses(t *testing.T) {
	wantRejected(t, (&policy.Policy{}).Evaluate(context.Background(), docker(refA, digestA)), "has no requirements for default")
}

func TestNilPolicyAcceptsEverything(t *testing.T) {
	var p *policy.Policy
	if v := p.Evaluate(context.Background(), docker(refA, digestA)); v.Decision != policy.Accepted || v.Err() != nil {
		t.Fatalf("nil policy: %+v", v)
	}
	if p.NeedsSignatures(policy.TransportDocker, refA) {
		t.Fatal("nil policy needs signatures")
	}
}

// TestCosignMatrix: the arrival paths' matrix, on the decision itself.
func TestCosignMatrix(t *testing.T) {
	dir := t.TempDir()
	s := newSigner(t, dir, "a.pub")
	other := newSigner(t, t.TempDir(), "other.pub")
	p := signedPolicy(t, `"keyPath": "`+dir+`/a.pub"`, "")
	ctx := context.Background()

	if !p.NeedsSignatures(policy.TransportDocker, refA) {
		t.Fatal("a sigstoreSigned scope needs no signatures")
	}
	wantVerified(t, p.Evaluate(ctx, docker(refA, digestA, cosign(t, s, refA, digestA))), "key a.pub")
	unsigned := p.Evaluate(ctx, docker(refA, digestA))
	wantRejected(t, unsigned, `transports.docker."quay.io"[0] requires a signature: no signature exists`)
	if !unsigned.Unsigned || !strings.HasPrefix(unsigned.String(), "unsigned, rejected by policy: ") {
		t.Errorf("an image with no signature: Unsigned %v, shown %q", unsigned.Unsigned, unsigned.String())
	}
	otherKey := p.Evaluate(ctx, docker(refA, digestA, cosign(t, other, refA, digestA)))
	wantRejected(t, otherKey, "cryptographic signature verification failed: not signed by key a.pub")
	if otherKey.Unsigned || !strings.HasPrefix(otherKey.String(), "rejected by policy: ") {
		t.Errorf("an image signed by another key: Unsigned %v, shown %q", otherKey.Unsigned, otherKey.String())
	}
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA, cosign(t, s, refA, digestB))), "signature for digest "+digestB+" does not match the image's "+digestA)

	tampered := cosign(t, s, refA, digestB)
	tampered.Payload = []byte(strings.Replace(string(tampered.Payload), digestB, digestA, 1))
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA, tampered)), "cryptographic signature verification failed")

	// One good signature among bad ones is enough; the reasons of several
	// bad ones are all named, bounded.
	wantVerified(t, p.Evaluate(ctx, docker(refA, digestA, cosign(t, other, refA, digestA), cosign(t, s, refA, digestA))), "key a.pub")
	var bad []policy.Signature
	for i := range 5 {
		sig := cosign(t, other, refA, digestA)
		sig.Source = fmt.Sprintf("tag sha256-a.sig layer %d", i)
		bad = append(bad, sig)
	}
	v := p.Evaluate(ctx, docker(refA, digestA, bad...))
	wantRejected(t, v, "none of the 5 signatures is accepted: tag sha256-a.sig layer 0: cryptographic")
	wantRejected(t, v, "; and 2 more")

	// A signature of a digest reference's repository.
	byDigest := "quay.io/team/app@" + digestA
	wantVerified(t, p.Evaluate(ctx, docker(byDigest, digestA, cosign(t, s, refA, digestA))), "key a.pub")
	// The image must have a digest.
	wantRejected(t, p.Evaluate(ctx, docker(refA, "", cosign(t, s, refA, digestA))), "no manifest digest")
}

func TestCosignPayloadStrict(t *testing.T) {
	dir := t.TempDir()
	_, k := newKey(t, dir, "a.pub")
	sv, err := signature.LoadSignerVerifier(k, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	p := signedPolicy(t, `"keyPath": "`+dir+`/a.pub"`, "")
	// Payloads signed by the key but not cosign's format: refused for
	// what they are, after the signature is checked.
	for _, tc := range []struct{ payload, want string }{
		{`{"critical": {"type": "atomic container signature", "image": {"docker-manifest-digest": "` + digestA + `"}, "identity": {"docker-reference": "` + refA + `"}}, "optional": null}`, `critical.type "atomic container signature"`},
		{`{"critical": {"type": "cosign container image signature", "image": {"docker-manifest-digest": "` + digestA + `"}, "identity": {"docker-reference": "` + refA + `"}, "extra": 1}, "optional": null}`, `unknown field "extra"`},
		{`{"critical": {"type": "cosign container image signature", "image": {"docker-manifest-digest": "` + digestA + `"}}, "optional": null}`, `field "identity" missing`},
		{`{"critical": {"type": "cosign container image signature", "image": {"docker-manifest-digest": "md5:x"}, "identity": {"docker-reference": "` + refA + `"}}, "optional": null}`, `docker-manifest-digest "md5:x"`},
		{`[]`, "not a JSON object"},
	} {
		sig := policy.Signature{Kind: policy.KindCosign, Payload: []byte(tc.payload), Source: "test"}
		if sig.Signature, err = sv.SignMessage(bytes.NewReader(sig.Payload)); err != nil {
			t.Fatal(err)
		}
		wantRejected(t, p.Evaluate(context.Background(), docker(refA, digestA, sig)), tc.want)
	}
}

func TestSignedIdentity(t *testing.T) {
	dir := t.TempDir()
	s := newSigner(t, dir, "a.pub")
	key := `"keyPath": "` + dir + `/a.pub"`
	ctx := context.Background()
	for _, tc := range []struct {
		identity  string // the signedIdentity field, "" for none
		image     string // the image's reference
		signedFor string // the identity signed
		ok        bool
	}{
		{"", refA, refA, true},
		{"", refA, "quay.io/team/app:v2", false},
		{"", refA, "quay.io/team/app", false}, // cosign's default identity: the repository alone
		{"", "quay.io/team/app@" + digestA, "quay.io/team/app:v9", true},
		{"", "quay.io/team/app@" + digestA, "quay.io/team/other:v1", false},
		{`{"type": "matchExact"}`, refA, refA, true},
		{`{"type": "matchExact"}`, "quay.io/team/app@" + digestA, refA, false},
		{`{"type": "matchRepoDigestOrExact"}`, refA, "quay.io/team/app:v2", false},
		{`{"type": "matchRepository"}`, refA, "quay.io/team/app", true},
		{`{"type": "matchRepository"}`, refA, "quay.io/team/app:other", true},
		{`{"type": "matchRepository"}`, refA, "quay.io/team/other", false},
		{`{"type": "exactReference", "dockerReference": "quay.io/signed/app:v1"}`, refA, "quay.io/signed/app:v1", true},
		{`{"type": "exactReference", "dockerReference": "quay.io/signed/app:v1"}`, refA, refA, false},
		{`{"type": "exactRepository", "dockerRepository": "quay.io/signed/app"}`, refA, "quay.io/signed/app:any", true},
		{`{"type": "exactRepository", "dockerRepository": "quay.io/signed/app"}`, refA, refA, false},
		{`{"type": "remapIdentity", "prefix": "quay.io/team", "signedPrefix": "registry.example.com/upstream"}`, refA, "registry.example.com/upstream/app:v1", true},
		{`{"type": "remapIdentity", "prefix": "quay.io/team", "signedPrefix": "registry.example.com/upstream"}`, refA, refA, false},
		{`{"type": "remapIdentity", "prefix": "quay.io/other", "signedPrefix": "registry.example.com/upstream"}`, refA, refA, true},
		// Spelled differently, the same reference.
		{"", "docker.io/library/busybox:1", "index.docker.io/library/busybox:1", true},
		{"", "docker.io/library/busybox:1", "busybox:1", true},
	} {
		extra := ""
		if tc.identity != "" {
			extra = `, "signedIdentity": ` + tc.identity
		}
		p := parse(t, `{"default": [{"type": "sigstoreSigned", `+key+extra+`}]}`)
		v := p.Evaluate(ctx, docker(tc.image, digestA, cosign(t, s, tc.signedFor, digestA)))
		if tc.ok {
			wantVerified(t, v, "key a.pub")
		} else {
			wantRejected(t, v, "signature for identity "+fmt.Sprintf("%q", tc.signedFor)+" is not accepted")
		}
	}
	// An archive image without a name: only the exact identities work.
	p := parse(t, `{"default": [{"type": "sigstoreSigned", `+key+`}]}`)
	img := policy.Image{Transport: policy.TransportOCIArchive, Scope: "/imports/a.tar", Digest: digestA, Signatures: []policy.Signature{cosign(t, s, refA, digestA)}}
	wantRejected(t, p.Evaluate(ctx, img), "the image has no docker reference")
	p = parse(t, `{"default": [{"type": "sigstoreSigned", `+key+`, "signedIdentity": {"type": "exactRepository", "dockerRepository": "quay.io/team/app"}}]}`)
	wantVerified(t, p.Evaluate(ctx, img), "key a.pub")
	img.Reference = refA
	p = parse(t, `{"default": [{"type": "sigstoreSigned", `+key+`}]}`)
	wantVerified(t, p.Evaluate(ctx, img), "key a.pub")
}

func TestBundles(t *testing.T) {
	dir := t.TempDir()
	s := newSigner(t, dir, "a.pub")
	other := newSigner(t, t.TempDir(), "other.pub")
	p := signedPolicy(t, `"keyPath": "`+dir+`/a.pub"`, "")
	ctx := context.Background()

	b := bundleSig(t, s, digestA)
	var doc struct {
		MediaType    string `json:"mediaType"`
		DsseEnvelope struct {
			PayloadType string `json:"payloadType"`
		} `json:"dsseEnvelope"`
	}
	if err := json.Unmarshal(b.Payload, &doc); err != nil || doc.MediaType != policy.ArtifactTypeBundle || doc.DsseEnvelope.PayloadType != "application/vnd.in-toto+json" {
		t.Fatalf("bundle %s: %v", b.Payload, err)
	}
	wantVerified(t, p.Evaluate(ctx, docker(refA, digestA, b)), "key a.pub")
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA, bundleSig(t, other, digestA))), "not verified by key a.pub")
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestB, b)), "not verified by key a.pub")

	tampered := b
	tampered.Payload = []byte(strings.Replace(string(b.Payload), `"payloadType"`, `"payloadTyp"`, 1))
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA, tampered)), "invalid sigstore bundle")
	tampered.Payload = []byte(`{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json"`)
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA, tampered)), "invalid sigstore bundle")

	// A bundle names no image: whatever signedIdentity says, only its
	// digest and key are checked (cosign verify checks no more).
	for _, id := range []string{`{"type": "matchRepository"}`, `{"type": "matchExact"}`, `{"type": "exactReference", "dockerReference": "quay.io/other/app:v1"}`} {
		p := signedPolicy(t, `"keyPath": "`+dir+`/a.pub"`, `, "signedIdentity": `+id)
		wantVerified(t, p.Evaluate(ctx, docker(refA, digestA, b)), "key a.pub")
		wantRejected(t, p.Evaluate(ctx, docker(refA, digestB, b)), "not verified by key a.pub")
	}
	noName := policy.Image{Transport: policy.TransportOCIArchive, Digest: digestA, Signatures: []policy.Signature{b}}
	p = parse(t, `{"default": [{"type": "sigstoreSigned", "keyPath": "`+dir+`/a.pub"}]}`)
	wantVerified(t, p.Evaluate(ctx, noName), "key a.pub")
}

// TestBundleContents: a bundle of a message signature over the manifest
// (cosign sign-blob --new-bundle-format of it) is a signature of the
// image; a bundle of another statement about it (an attestation) is not.
func TestBundleContents(t *testing.T) {
	kp, err := sgsign.NewEphemeralKeypair(nil)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := kp.GetPublicKeyPem()
	if err != nil {
		t.Fatal(err)
	}
	p := parse(t, `{"default": [{"type": "sigstoreSigned", "keyData": "`+base64.StdEncoding.EncodeToString([]byte(pub))+`"}]}`)
	manifest := []byte(`{"schemaVersion": 2}`)
	sum := sha256.Sum256(manifest)
	manifestDigest := "sha256:" + hex.EncodeToString(sum[:])
	bundleOf := func(content sgsign.Content) policy.Signature {
		t.Helper()
		pb, err := sgsign.Bundle(content, kp, sgsign.BundleOptions{})
		if err != nil {
			t.Fatal(err)
		}
		data, err := protojson.Marshal(pb)
		if err != nil {
			t.Fatal(err)
		}
		return policy.Signature{Kind: policy.KindBundle, Payload: data, Source: "referrer"}
	}
	ctx := context.Background()
	msg := bundleOf(&sgsign.PlainData{Data: manifest})
	wantVerified(t, p.Evaluate(ctx, docker(refA, manifestDigest, msg)), "key keyData")
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA, msg)), "not verified by key keyData")

	statement := `{"_type": "https://in-toto.io/Statement/v1", "subject": [{"digest": {"sha256": "` + hex.EncodeToString(sum[:]) + `"}}],
		"predicateType": "https://slsa.dev/provenance/v1", "predicate": {}}`
	att := bundleOf(&sgsign.DSSEData{Data: []byte(statement), PayloadType: "application/vnd.in-toto+json"})
	wantRejected(t, p.Evaluate(ctx, docker(refA, manifestDigest, att)), `a bundle of an attestation (predicate type "https://slsa.dev/provenance/v1"), not of a signature`)
}

func TestKeyPathsAndKeyData(t *testing.T) {
	dir := t.TempDir()
	a := newSigner(t, dir, "a.pub")
	b := newSigner(t, dir, "b.pub")
	c := newSigner(t, t.TempDir(), "c.pub")
	ctx := context.Background()
	p := signedPolicy(t, `"keyPaths": ["`+dir+`/a.pub", "`+dir+`/b.pub"]`, "")
	wantVerified(t, p.Evaluate(ctx, docker(refA, digestA, cosign(t, b, refA, digestA))), "key b.pub")
	wantVerified(t, p.Evaluate(ctx, docker(refA, digestA, bundleSig(t, a, digestA))), "key a.pub")
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA, cosign(t, c, refA, digestA))), "not signed by any of the keys a.pub, b.pub")

	pemB, _ := b.PublicKeyPEM()
	pemC, _ := c.PublicKeyPEM()
	p = signedPolicy(t, `"keyData": "`+base64.StdEncoding.EncodeToString(pemB)+`"`, "")
	wantVerified(t, p.Evaluate(ctx, docker(refA, digestA, cosign(t, b, refA, digestA))), "key keyData")
	p = signedPolicy(t, `"keyDatas": ["`+base64.StdEncoding.EncodeToString(pemB)+`", "`+base64.StdEncoding.EncodeToString(pemC)+`"]`, "")
	wantVerified(t, p.Evaluate(ctx, docker(refA, digestA, cosign(t, c, refA, digestA))), "key keyDatas[1]")
}

func TestRequirementsAllMet(t *testing.T) {
	dir := t.TempDir()
	a := newSigner(t, dir, "a.pub")
	b := newSigner(t, dir, "b.pub")
	ctx := context.Background()
	p := parse(t, `{"default": [{"type": "insecureAcceptAnything"},
		{"type": "sigstoreSigned", "keyPath": "`+dir+`/a.pub"},
		{"type": "sigstoreSigned", "keyPath": "`+dir+`/b.pub"}]}`)
	wantVerified(t, p.Evaluate(ctx, docker(refA, digestA, cosign(t, a, refA, digestA), bundleSig(t, b, digestA))), "key a.pub, key b.pub")
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA, cosign(t, a, refA, digestA))), "default[2]")

	p = parse(t, `{"default": [{"type": "insecureAcceptAnything"}, {"type": "reject"}]}`)
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA)), "the policy rejects images of default")
	if p.NeedsSignatures(policy.TransportDocker, refA) {
		t.Fatal("a rejected scope needs signatures")
	}
	p = parse(t, `{"default": [{"type": "insecureAcceptAnything"}]}`)
	if v := p.Evaluate(ctx, docker(refA, digestA)); v.Decision != policy.Accepted || v.By != "" {
		t.Fatalf("insecureAcceptAnything: %+v", v)
	}
}

func TestArchives(t *testing.T) {
	dir := t.TempDir()
	s := newSigner(t, dir, "a.pub")
	ctx := context.Background()
	p := parse(t, `{"default": [{"type": "reject"}], "transports": {
		"oci-archive": {"": [{"type": "sigstoreSigned", "keyPath": "`+dir+`/a.pub", "signedIdentity": {"type": "matchRepository"}}]},
		"docker-archive": {"": [{"type": "sigstoreSigned", "keyPath": "`+dir+`/a.pub"}]}}}`)
	oci := policy.Image{Transport: policy.TransportOCIArchive, Reference: refA, Digest: digestA, Signatures: []policy.Signature{cosign(t, s, "quay.io/team/app", digestA)}}
	wantVerified(t, p.Evaluate(ctx, oci), "key a.pub")
	wantRejected(t, p.Evaluate(ctx, policy.Image{Transport: policy.TransportDockerArchive, Reference: refA}), "docker-archive carries no signatures; use an OCI archive")
	if !p.NeedsSignatures(policy.TransportOCIArchive, "") {
		t.Fatal("oci-archive needs no signatures")
	}
	wantRejected(t, p.Evaluate(ctx, policy.Image{Transport: "dir", Scope: "/x"}), `unknown transport "dir"`)
}

func TestLimits(t *testing.T) {
	dir := t.TempDir()
	s := newSigner(t, dir, "a.pub")
	p := signedPolicy(t, `"keyPath": "`+dir+`/a.pub"`, "")
	ctx := context.Background()
	big := cosign(t, s, refA, digestA)
	big.Payload = append(big.Payload, make([]byte, policy.MaxSignatureBytes)...)
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA, big)), "larger than")
	bigBundle := policy.Signature{Kind: policy.KindBundle, Payload: make([]byte, policy.MaxSignatureBytes+1)}
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA, bigBundle)), "larger than")

	var many []policy.Signature
	for range 2*policy.MaxSignatures + 1 {
		many = append(many, cosign(t, s, refA, digestA))
	}
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA, many...)), "signatures, more than")

	// A hostile source's name is cut in the reason.
	bad := cosign(t, s, refA, digestB)
	bad.Source = strings.Repeat("x", 10000)
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA, bad)), "xxx")
	bad.Source = "tag\nforged: line"
	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA, bad)), "tag forged: line")

	wantRejected(t, p.Evaluate(ctx, docker(refA, digestA, policy.Signature{Kind: "gpg"})), `unknown signature kind "gpg"`)

	canceled, cancel := context.WithCancel(ctx)
	cancel()
	wantRejected(t, p.Evaluate(canceled, docker(refA, digestA, cosign(t, s, refA, digestA))), "context canceled")
}

// FuzzEvaluate: hostile signatures (a bundle's JSON, a payload and its
// signature) are refused with one bounded line, never a panic.
func FuzzEvaluate(f *testing.F) {
	dir := f.TempDir()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(k)
	s, err := sign.New(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil)
	if err != nil {
		f.Fatal(err)
	}
	pub, _ := s.PublicKeyPEM()
	if err := os.WriteFile(filepath.Join(dir, "a.pub"), pub, 0o644); err != nil {
		f.Fatal(err)
	}
	p, err := policy.Parse([]byte(`{"default": [{"type": "sigstoreSigned", "keyPath": "`+dir+`/a.pub"}]}`), "policy.json")
	if err != nil {
		f.Fatal(err)
	}
	b, _ := s.Bundle(digestA)
	c, _ := s.Cosign(refA, digestA)
	f.Add(b.Payload, c.Payload, c.Signature)
	f.Fuzz(func(t *testing.T, bundleJSON, payload, sig []byte) {
		img := docker(refA, digestB,
			policy.Signature{Kind: policy.KindBundle, Payload: bundleJSON, Source: "b"},
			policy.Signature{Kind: policy.KindCosign, Payload: payload, Signature: sig, Source: "c"})
		v := p.Evaluate(context.Background(), img)
		if v.Decision != policy.Rejected || len(v.Reason) > policy.MaxReason || strings.ContainsAny(v.Reason, "\n\r") {
			t.Fatalf("verdict %+v", v)
		}
	})
}
