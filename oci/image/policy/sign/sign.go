// Package sign makes the signatures policy verifies, on a build machine:
// cosign's simple-signing signatures and sigstore bundles, with a private
// key the operator holds. Both are made with the sigstore project's
// libraries, in the formats cosign writes, so that cosign verifies them
// too and policy verifies cosign's.
package sign

import (
	"bytes"
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/opencontainers/go-digest"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	protobundle "github.com/sigstore/protobuf-specs/gen/pb-go/bundle/v1"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	protodsse "github.com/sigstore/protobuf-specs/gen/pb-go/dsse"
	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	sigopts "github.com/sigstore/sigstore/pkg/signature/options"
	"github.com/sigstore/sigstore/pkg/signature/payload"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// maxKeyBytes bounds a private key file.
const maxKeyBytes = 64 << 10

// Signer signs with one private key.
type Signer struct {
	// simple signs cosign's simple-signing payloads: SHA-256, as cosign
	// does and policy verifies.
	simple signature.SignerVerifier
	// keypair signs bundles with the key's default algorithm, as cosign's
	// --key does (sigstore-go's Keypair over a SignerVerifier).
	keypair *keypair
}

// Load reads a private key: PKCS#8, EC or PKCS#1 PEM, or cosign's encrypted
// key (password from the caller, e.g. $COSIGN_PASSWORD).
func Load(path string, password []byte) (*Signer, error) {
	data, err := atomicfile.Read(path, maxKeyBytes)
	if err != nil {
		return nil, err
	}
	s, err := New(data, password)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// New makes a Signer of a PEM private key, as Load reads it. Its errors
// never quote the key.
func New(pemData, password []byte) (*Signer, error) {
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(pemData, func(bool) ([]byte, error) {
		if password == nil {
			return nil, errors.New("the key is encrypted and no password was given")
		}
		return password, nil
	})
	if err != nil {
		return nil, fmt.Errorf("not a usable private key: %s", keyError(err))
	}
	simple, err := signature.LoadSignerVerifier(priv, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("unsupported private key: %v", err)
	}
	def, err := signature.LoadDefaultSignerVerifier(priv)
	if err != nil {
		return nil, fmt.Errorf("unsupported private key: %v", err)
	}
	kp, err := newKeypair(def)
	if err != nil {
		return nil, err
	}
	return &Signer{simple: simple, keypair: kp}, nil
}

// keyError is what a key parser said, on one line and short; the sigstore
// and x509 parsers do not quote the key.
func keyError(err error) string {
	s := strings.ReplaceAll(err.Error(), "\n", " ")
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// Cosign signs digest as the image named ref (the identity a policy's
// signedIdentity matches), in cosign's simple-signing format.
func (s *Signer) Cosign(ref, digest string) (policy.Signature, error) {
	d, err := imageDigest(ref, digest)
	if err != nil {
		return policy.Signature{}, err
	}
	// The payload cosign itself makes (sigstore's payload.Cosign), with the
	// identity claimed as cosign sign --sign-container-identity does: a
	// policy's default signedIdentity wants the reference with its tag.
	p, err := json.Marshal(payload.Cosign{Image: d, ClaimedIdentity: ref})
	if err != nil {
		return policy.Signature{}, err
	}
	sig, err := s.simple.SignMessage(bytes.NewReader(p))
	if err != nil {
		return policy.Signature{}, err
	}
	return policy.Signature{Kind: policy.KindCosign, Payload: p, Signature: sig, Source: "cosign signature"}, nil
}

// imageDigest is ref's repository at digest.
func imageDigest(ref, d string) (name.Digest, error) {
	if _, err := digest.Parse(d); err != nil {
		return name.Digest{}, fmt.Errorf("digest %q: %w", d, err)
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return name.Digest{}, fmt.Errorf("image reference: %w", err)
	}
	return r.Context().Digest(d), nil
}

// Bundle signs digest in a sigstore bundle, verifiable offline with the
// public key alone: a DSSE envelope of the in-toto statement cosign sign
// --new-bundle-format makes (predicate type policy.CosignSignPredicateType,
// subject the digest), without a transparency log entry or a timestamp.
func (s *Signer) Bundle(d string) (policy.Signature, error) {
	parsed, err := digest.Parse(d)
	if err != nil {
		return policy.Signature{}, fmt.Errorf("digest %q: %w", d, err)
	}
	statement := &intoto.Statement{
		Type: intoto.StatementTypeUri,
		Subject: []*intoto.ResourceDescriptor{{
			Digest: map[string]string{parsed.Algorithm().String(): parsed.Encoded()},
		}},
		PredicateType: policy.CosignSignPredicateType,
		Predicate:     &structpb.Struct{},
	}
	data, err := protojson.Marshal(statement)
	if err != nil {
		return policy.Signature{}, err
	}
	pb, err := s.keypair.dsseBundle(data, "application/vnd.in-toto+json")
	if err != nil {
		return policy.Signature{}, err
	}
	b, err := bundle.NewBundle(pb)
	if err != nil {
		return policy.Signature{}, err
	}
	out, err := b.MarshalJSON()
	if err != nil {
		return policy.Signature{}, err
	}
	return policy.Signature{Kind: policy.KindBundle, Payload: out, Source: "sigstore bundle"}, nil
}

// PublicKeyPEM is the key's public half, as policy's keyPath reads it.
func (s *Signer) PublicKeyPEM() ([]byte, error) {
	return cryptoutils.MarshalPublicKeyToPEM(s.keypair.pub)
}

// keypair signs as cosign's SignerVerifierKeypair (a sigstore-go Keypair)
// does with a key loaded from a file: the hint is the base64 SHA-256 of the
// public key's DER, the algorithm the key's default.
type keypair struct {
	sv   signature.SignerVerifier
	pub  crypto.PublicKey
	hint []byte
	alg  signature.AlgorithmDetails
}

func newKeypair(sv signature.SignerVerifier) (*keypair, error) {
	pub, err := sv.PublicKey()
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(der)
	alg, err := signature.GetDefaultAlgorithmDetails(pub)
	if err != nil {
		return nil, fmt.Errorf("unsupported private key: %v", err)
	}
	return &keypair{sv: sv, pub: pub, hint: []byte(base64.StdEncoding.EncodeToString(sum[:])), alg: alg}, nil
}

// bundleMediaType is the bundle format sigstore-go's sign.Bundle writes.
const bundleMediaType = "application/vnd.dev.sigstore.bundle.v0.3+json"

// dsseBundle is the bundle sigstore-go's sign.Bundle makes of DSSE content
// with this key and no other option: the envelope of payload signed over its
// pre-authentication encoding, and the key's hint. That package is not
// linked: it brings the clients of Fulcio, Rekor and timestamp authorities
// with it (OpenID Connect, a PKCS#7 library, Rekor's OpenAPI client), none
// of which a bundle signed with a key uses, about 0.8 MB of the binary.
func (k *keypair) dsseBundle(payload []byte, payloadType string) (*protobundle.Bundle, error) {
	sig, err := k.sign(dsse.PAE(payloadType, payload))
	if err != nil {
		return nil, err
	}
	return &protobundle.Bundle{
		MediaType: bundleMediaType,
		VerificationMaterial: &protobundle.VerificationMaterial{
			Content: &protobundle.VerificationMaterial_PublicKey{
				PublicKey: &protocommon.PublicKeyIdentifier{Hint: string(k.hint)},
			},
		},
		Content: &protobundle.Bundle_DsseEnvelope{
			DsseEnvelope: &protodsse.Envelope{
				Payload:     payload,
				PayloadType: payloadType,
				Signatures:  []*protodsse.Signature{{Sig: sig}},
			},
		},
	}, nil
}

// sign signs data with the key's default algorithm, hashing it first
// unless the algorithm hashes as it signs (pure Ed25519).
func (k *keypair) sign(data []byte) ([]byte, error) {
	var opts []signature.SignOption
	if h := k.alg.GetHashType(); h != crypto.Hash(0) {
		hh := h.New()
		hh.Write(data)
		opts = append(opts, sigopts.WithDigest(hh.Sum(nil)))
	}
	return k.sv.SignMessage(bytes.NewReader(data), opts...)
}
