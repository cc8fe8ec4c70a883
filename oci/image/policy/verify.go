package policy

import (
	"bytes"
	"context"
	"crypto"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// CosignSignPredicateType is the in-toto predicate type of the statement a
// sigstore bundle signs when cosign signs an image (cosign sign
// --new-bundle-format): its subject is the image's digest. A bundle of any
// other statement is an attestation about the image, not its signature.
const CosignSignPredicateType = "https://sigstore.dev/cosign/sign/v1"

// hashAlgorithm is the hash of cosign's simple-signing signatures
// (containers/image hard-codes it too).
const hashAlgorithm = crypto.SHA256

// requirement is one entry of a scope's list.
type requirement struct {
	kind string
	// sigstoreSigned's:
	keys []*key
	// identity is matched against the docker reference a simple-signing
	// signature claims. A sigstore bundle claims none: it signs the digest
	// alone, as cosign sign --new-bundle-format makes it, and cosign
	// verify checks nothing more; signedIdentity does not apply to it.
	identity *identity
}

type requirements []requirement

// key is a trusted public key and the verifiers made of it.
type key struct {
	name string // the file's base name, or keyData
	// cosign verifies simple-signing signatures: SHA-256, as cosign signs
	// and containers/image verifies them.
	cosign signature.Verifier
	// bundle verifies sigstore bundles offline: the key is the trusted
	// material, no transparency log or timestamp is required.
	bundle *verify.Verifier
}

func loadKey(name string, pub crypto.PublicKey) (*key, error) {
	cv, err := signature.LoadVerifier(pub, hashAlgorithm)
	if err != nil {
		return nil, fmt.Errorf("unsupported public key: %v", err)
	}
	dv, err := signature.LoadDefaultVerifier(pub)
	if err != nil {
		return nil, fmt.Errorf("unsupported public key: %v", err)
	}
	material := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		return root.NewExpiringKey(dv, time.Time{}, time.Time{}), nil
	})
	bv, err := verify.NewVerifier(material, verify.WithNoObserverTimestamps())
	if err != nil {
		return nil, err
	}
	return &key{name: name, cosign: cv, bundle: bv}, nil
}

// accepts returns the name of the key that verified one of img's
// signatures (one is enough, as in containers/image), or why none did.
func (r *requirement) accepts(ctx context.Context, img Image) (string, error) {
	if img.Transport == TransportDockerArchive {
		return "", errors.New("docker-archive carries no signatures; use an OCI archive")
	}
	if len(img.Signatures) == 0 {
		return "", errors.New("no signature exists")
	}
	if _, err := digest.Parse(img.Digest); err != nil {
		return "", errors.New("the image has no manifest digest to verify signatures against")
	}
	var reasons []string
	for _, sig := range img.Signatures {
		if err := ctx.Err(); err != nil {
			return "", err
		}
		k, err := r.verify(img, sig)
		if err == nil {
			return k, nil
		}
		reasons = append(reasons, podspec.Truncate(sig.Source, 120)+": "+err.Error())
	}
	if len(reasons) == 1 {
		return "", errors.New(reasons[0])
	}
	const shown = 3
	msg := "none of the " + strconv.Itoa(len(reasons)) + " signatures is accepted: " + strings.Join(reasons[:min(shown, len(reasons))], "; ")
	if len(reasons) > shown {
		msg += fmt.Sprintf("; and %d more", len(reasons)-shown)
	}
	return "", errors.New(msg)
}

func (r *requirement) verify(img Image, sig Signature) (string, error) {
	switch sig.Kind {
	case KindCosign:
		return r.verifyCosign(img, sig)
	case KindBundle:
		return r.verifyBundle(img, sig)
	}
	return "", fmt.Errorf("unknown signature kind %s", quote(sig.Kind))
}

// keyNames lists the requirement's keys for a message.
func (r *requirement) keyNames() string {
	names := make([]string, len(r.keys))
	for i, k := range r.keys {
		names[i] = k.name
	}
	if len(names) == 1 {
		return "key " + names[0]
	}
	return "any of the keys " + podspec.Truncate(strings.Join(names, ", "), 200)
}

// verifyCosign checks a simple-signing signature as containers/image's
// VerifySigstorePayload does: the signature by one of the keys first, only
// then the payload it vouches for, its digest and its identity.
func (r *requirement) verifyCosign(img Image, sig Signature) (string, error) {
	if len(sig.Payload) > MaxSignatureBytes || len(sig.Signature) > MaxSignatureBytes {
		return "", fmt.Errorf("larger than %d bytes", MaxSignatureBytes)
	}
	var by *key
	for _, k := range r.keys {
		if k.cosign.VerifySignature(bytes.NewReader(sig.Signature), bytes.NewReader(sig.Payload)) == nil {
			by = k
			break
		}
	}
	if by == nil {
		return "", fmt.Errorf("cryptographic signature verification failed: not signed by %s", r.keyNames())
	}
	signed, ref, err := parseSimpleSigning(sig.Payload)
	if err != nil {
		return "", fmt.Errorf("invalid simple-signing payload: %w", err)
	}
	if signed != img.Digest {
		return "", fmt.Errorf("signature for digest %s does not match the image's %s", signed, img.Digest)
	}
	intended := img.Reference
	if intended == "" && img.Transport == TransportDocker {
		intended = img.Scope
	}
	if err := r.identity.matches(intended, ref); err != nil {
		return "", err
	}
	return by.name, nil
}

// parseSimpleSigning reads the payload cosign signs
// (payload.SimpleContainerImage) strictly, as containers/image does: exactly
// critical and optional; critical exactly type, image and identity.
func parseSimpleSigning(data []byte) (manifestDigest, dockerReference string, err error) {
	var top struct {
		Critical json.RawMessage `json:"critical"`
		Optional json.RawMessage `json:"optional"`
	}
	if err := exactFields(data, &top, "critical", "optional"); err != nil {
		return "", "", err
	}
	var critical struct {
		Type     string          `json:"type"`
		Image    json.RawMessage `json:"image"`
		Identity json.RawMessage `json:"identity"`
	}
	if err := exactFields(top.Critical, &critical, "type", "image", "identity"); err != nil {
		return "", "", fmt.Errorf("critical: %w", err)
	}
	if critical.Type != payload.CosignSignatureType {
		return "", "", fmt.Errorf("critical.type %s is not %q", quote(critical.Type), payload.CosignSignatureType)
	}
	var image payload.Image
	if err := exactFields(critical.Image, &image, "docker-manifest-digest"); err != nil {
		return "", "", fmt.Errorf("critical.image: %w", err)
	}
	if _, err := digest.Parse(image.DockerManifestDigest); err != nil {
		return "", "", fmt.Errorf("critical.image.docker-manifest-digest %s: %v", quote(image.DockerManifestDigest), err)
	}
	var id payload.Identity
	if err := exactFields(critical.Identity, &id, "docker-reference"); err != nil {
		return "", "", fmt.Errorf("critical.identity: %w", err)
	}
	return image.DockerManifestDigest, id.DockerReference, nil
}

// exactFields decodes the object data into v, which must have exactly the
// fields named, each once.
func exactFields(data []byte, v any, fields ...string) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		return errors.New("not a JSON object")
	}
	for _, f := range fields {
		if _, ok := m[f]; !ok {
			return fmt.Errorf("field %q missing", f)
		}
	}
	if len(m) != len(fields) {
		for k := range m {
			if !contains(fields, k) {
				return fmt.Errorf("unknown field %s", quote(k))
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errors.New("fields of the wrong type")
	}
	return nil
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// verifyBundle checks a sigstore bundle with sigstore-go: signed by one of
// the keys (not a certificate), over the image's digest, offline. It names
// no image, so signedIdentity is not checked (see requirement.identity).
func (r *requirement) verifyBundle(img Image, sig Signature) (string, error) {
	if len(sig.Payload) > MaxSignatureBytes {
		return "", fmt.Errorf("larger than %d bytes", MaxSignatureBytes)
	}
	var b bundle.Bundle
	if err := b.UnmarshalJSON(sig.Payload); err != nil {
		return "", fmt.Errorf("invalid sigstore bundle: %s", podspec.Truncate(err.Error(), 200))
	}
	d := digest.Digest(img.Digest)
	sum, err := hex.DecodeString(d.Encoded())
	if err != nil {
		return "", err
	}
	policy := verify.NewPolicy(verify.WithArtifactDigest(d.Algorithm().String(), sum), verify.WithKey())
	var last error
	for _, k := range r.keys {
		res, err := k.bundle.Verify(&b, policy)
		if err != nil {
			last = err
			continue
		}
		if res.Statement != nil && res.Statement.GetPredicateType() != CosignSignPredicateType {
			return "", fmt.Errorf("a bundle of an attestation (predicate type %s), not of a signature", quote(res.Statement.GetPredicateType()))
		}
		return k.name, nil
	}
	return "", fmt.Errorf("not verified by %s: %s", r.keyNames(), podspec.Truncate(last.Error(), 200))
}
