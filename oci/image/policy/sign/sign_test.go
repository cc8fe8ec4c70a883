package sign_test

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sigstore/sigstore-go/pkg/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore-go/pkg/verify"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/staticpodd/staticpodd/oci/image/policy"
	"github.com/staticpodd/staticpodd/oci/image/policy/sign"
)

const digest = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func pemOf(t *testing.T, typ string, der []byte, err error) []byte {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// TestKeyFormats: every private key format Load reads signs what policy
// verifies, both kinds, under a policy of its public key.
func TestKeyFormats(t *testing.T) {
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ec384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaKey, _ := rsa.GenerateKey(rand.Reader, 2048)
	_, edKey, _ := ed25519.GenerateKey(rand.Reader)
	pkcs8 := func(k any) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		return pemOf(t, "PRIVATE KEY", der, err)
	}
	ecDER, err := x509.MarshalECPrivateKey(ec)
	encrypted, _, err2 := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc([]byte("hunter2")))
	if err2 != nil {
		t.Fatal(err2)
	}
	for name, tc := range map[string]struct {
		pem      []byte
		password []byte
	}{
		"pkcs8-ecdsa":      {pem: pkcs8(ec)},
		"pkcs8-p384":       {pem: pkcs8(ec384)},
		"pkcs8-rsa":        {pem: pkcs8(rsaKey)},
		"pkcs8-ed25519":    {pem: pkcs8(edKey)},
		"ec":               {pem: pemOf(t, "EC PRIVATE KEY", ecDER, err)},
		"pkcs1":            {pem: pemOf(t, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(rsaKey), nil)},
		"cosign-encrypted": {pem: encrypted, password: []byte("hunter2")},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			keyFile := filepath.Join(dir, "cosign.key")
			if err := os.WriteFile(keyFile, tc.pem, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := sign.Load(keyFile, tc.password)
			if err != nil {
				t.Fatal(err)
			}
			pub, err := s.PublicKeyPEM()
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, "cosign.pub"), pub, 0o644); err != nil {
				t.Fatal(err)
			}
			p, err := policy.Parse([]byte(`{"default": [{"type": "sigstoreSigned", "keyPath": "`+dir+`/cosign.pub"}]}`), "policy.json")
			if err != nil {
				t.Fatal(err)
			}
			c, err := s.Cosign("quay.io/a/b:v1", digest)
			if err != nil {
				t.Fatal(err)
			}
			b, err := s.Bundle(digest)
			if err != nil {
				t.Fatal(err)
			}
			for _, sig := range []policy.Signature{c, b} {
				img := policy.Image{Transport: policy.TransportDocker, Scope: "quay.io/a/b:v1", Digest: digest, Signatures: []policy.Signature{sig}}
				if v := p.Evaluate(context.Background(), img); v.Decision != policy.Verified || v.By != "key cosign.pub" {
					t.Errorf("%s signature: %+v", sig.Kind, v)
				}
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	dir := t.TempDir()
	encrypted, pubPEM, err := cryptoutils.GeneratePEMEncodedECDSAKeyPair(elliptic.P256(), cryptoutils.StaticPasswordFunc([]byte("hunter2")))
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) string {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, data, 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	enc := write("enc.key", encrypted)
	for _, tc := range []struct {
		file     string
		password []byte
		want     string
	}{
		{enc, nil, "the key is encrypted and no password was given"},
		{enc, []byte("wrong"), "not a usable private key"},
		{write("pub.key", pubPEM), nil, "not a usable private key"},
		{write("junk.key", []byte("junk")), nil, "not a usable private key"},
		{write("big.key", make([]byte, 64<<10+1)), nil, "larger than"},
		{filepath.Join(dir, "missing.key"), nil, "no such file"},
	} {
		_, err := sign.Load(tc.file, tc.password)
		if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.file) {
			t.Errorf("%s: %v, want %q", tc.file, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "PRIVATE KEY") {
			t.Errorf("%s: the error quotes the key: %v", tc.file, err)
		}
	}
}

func newSigner(t *testing.T) (*sign.Signer, *ecdsa.PrivateKey) {
	t.Helper()
	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, err := x509.MarshalPKCS8PrivateKey(k)
	s, err := sign.New(pemOf(t, "PRIVATE KEY", der, err), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s, k
}

// TestCosignPayload: the payload is cosign's, byte for byte, and its
// signature verifies as cosign verifies it (SHA-256, the key's verifier).
func TestCosignPayload(t *testing.T) {
	s, k := newSigner(t)
	sig, err := s.Cosign("quay.io/a/b:v1", digest)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"critical":{"identity":{"docker-reference":"quay.io/a/b:v1"},"image":{"docker-manifest-digest":"` + digest + `"},"type":"cosign container image signature"},"optional":null}`
	if string(sig.Payload) != want || sig.Kind != policy.KindCosign {
		t.Fatalf("payload %s\nwant    %s", sig.Payload, want)
	}
	v, err := signature.LoadVerifier(k.Public(), crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.VerifySignature(strings.NewReader(string(sig.Signature)), strings.NewReader(string(sig.Payload))); err != nil {
		t.Fatal(err)
	}
	// A digest reference keeps its digest as the claimed identity.
	byDigest := "quay.io/a/b@" + digest
	if sig, err := s.Cosign(byDigest, digest); err != nil || !strings.Contains(string(sig.Payload), `"docker-reference":"`+byDigest+`"`) {
		t.Fatalf("%s: %s, %v", byDigest, sig.Payload, err)
	}
	for _, tc := range [][2]string{{"quay.io/a/b:v1", "latest"}, {"quay.io/A/b", digest}, {"", digest}} {
		if _, err := s.Cosign(tc[0], tc[1]); err == nil {
			t.Errorf("Cosign(%q, %q) signed", tc[0], tc[1])
		}
	}
}

// TestBundleFormat: the bundle is what cosign sign --new-bundle-format
// makes with a key, and sigstore-go verifies it as cosign verify --key
// does: the key as trusted material, the image digest as the artifact.
func TestBundleFormat(t *testing.T) {
	s, k := newSigner(t)
	sig, err := s.Bundle(digest)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		MediaType            string `json:"mediaType"`
		VerificationMaterial struct {
			PublicKey struct {
				Hint string `json:"hint"`
			} `json:"publicKey"`
			TlogEntries []any `json:"tlogEntries"`
		} `json:"verificationMaterial"`
		DsseEnvelope struct {
			Payload     []byte `json:"payload"`
			PayloadType string `json:"payloadType"`
			Signatures  []struct {
				Sig []byte `json:"sig"`
			} `json:"signatures"`
		} `json:"dsseEnvelope"`
	}
	if err := json.Unmarshal(sig.Payload, &doc); err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKIXPublicKey(k.Public())
	if doc.MediaType != policy.ArtifactTypeBundle || doc.DsseEnvelope.PayloadType != "application/vnd.in-toto+json" ||
		len(doc.DsseEnvelope.Signatures) != 1 || len(doc.VerificationMaterial.TlogEntries) != 0 || doc.VerificationMaterial.PublicKey.Hint != hint(der) {
		t.Fatalf("bundle %s", sig.Payload)
	}
	wantStatement := `{"_type":"https://in-toto.io/Statement/v1","subject":[{"digest":{"sha256":"` + strings.TrimPrefix(digest, "sha256:") + `"}}],"predicateType":"https://sigstore.dev/cosign/sign/v1","predicate":{}}`
	if got, want := compact(t, doc.DsseEnvelope.Payload), compact(t, []byte(wantStatement)); got != want {
		t.Fatalf("statement %s\nwant      %s", got, want)
	}

	var b bundle.Bundle
	if err := b.UnmarshalJSON(sig.Payload); err != nil {
		t.Fatal(err)
	}
	verifier, _ := signature.LoadDefaultVerifier(k.Public())
	material := root.NewTrustedPublicKeyMaterial(func(string) (root.TimeConstrainedVerifier, error) {
		return root.NewExpiringKey(verifier, time.Time{}, time.Time{}), nil
	})
	v, err := verify.NewVerifier(material, verify.WithNoObserverTimestamps())
	if err != nil {
		t.Fatal(err)
	}
	sum, _ := hex.DecodeString(strings.TrimPrefix(digest, "sha256:"))
	res, err := v.Verify(&b, verify.NewPolicy(verify.WithArtifactDigest("sha256", sum), verify.WithKey()))
	if err != nil || res.Statement.GetPredicateType() != policy.CosignSignPredicateType {
		t.Fatalf("verify: %v", err)
	}
	if _, err := s.Bundle("sha256:x"); err == nil {
		t.Fatal("a bundle of an invalid digest")
	}
}

// hint is cosign's and sigstore-go's key hint: base64 SHA-256 of the DER.
func hint(der []byte) string {
	sum := sha256.Sum256(der)
	return base64.StdEncoding.EncodeToString(sum[:])
}

// compact is JSON b with its keys sorted.
func compact(t *testing.T, b []byte) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	out, _ := json.Marshal(v)
	return string(out)
}
