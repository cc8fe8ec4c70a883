package tests

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/staticpodd/staticpodd/oci/image/policy"
	"github.com/staticpodd/staticpodd/oci/image/policy/sign"
)

// Under an image policy (--image-policy) that requires a key for a
// registry (cosign's repository identity, matchRepository), a pod whose
// image there is unsigned waits SignatureValidationFailed with the
// kubelet's message and an event, and nothing of the image enters the
// store; a pod whose image is signed (cosign's tag scheme) runs, and its
// status shows the digest that was verified.
func TestPullSignaturePolicy(t *testing.T) {
	t.Parallel()
	r := newPullRegistry(t)
	d := pullDaemon(t, r)
	signedTar, unsignedTar := filepath.Join(d.Dir, "signed.tar"), filepath.Join(d.Dir, "unsigned.tar")
	buildImage(t, signedTar, "-ref", "signed:v1", "-cmd", loopCmd("signed"))
	buildImage(t, unsignedTar, "-ref", "unsigned:v1", "-cmd", loopCmd("unsigned"))
	_, signedRef := r.push(signedTar, "team/signed:v1")
	unsignedID, _ := r.push(unsignedTar, "team/unsigned:v1")

	signer, pub := policyKey(t, d.Dir)
	_, digest, _ := strings.Cut(signedRef, "@")
	sig, err := signer.Cosign(r.addr+"/team/signed", digest)
	if err != nil {
		t.Fatal(err)
	}
	sigImg, err := policy.SignatureImage([]policy.Signature{sig})
	if err != nil {
		t.Fatal(err)
	}
	tag, err := policy.SignatureTag(digest)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := name.ParseReference(r.addr+"/team/signed:"+tag, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(dst, sigImg); err != nil {
		t.Fatal(err)
	}

	policyFile := filepath.Join(d.Dir, "policy.json")
	doc := fmt.Sprintf(`{"default": [{"type": "insecureAcceptAnything"}],
 "transports": {"docker": {%q: [{"type": "sigstoreSigned", "keyPath": %q, "signedIdentity": {"type": "matchRepository"}}]}}}`,
		r.addr, pub)
	if err := os.WriteFile(policyFile, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Args = append(d.Args, "--image-policy", policyFile)

	d.Start()
	unsigned := r.addr + "/team/unsigned:v1"
	d.WriteManifest("unsigned.yaml", appPod("unsigned", unsigned))
	d.WriteManifest("signed.yaml", appPod("signed", r.addr+"/team/signed:v1"))
	want := "image pull failed for " + unsigned + " because the signature validation failed: "
	d.Eventually(60*time.Second, "the unsigned image refused", func() error {
		w := statusOf(d.Pod("unsigned")).State.Waiting
		switch {
		case w == nil:
			return errors.New("not waiting")
		case w.Reason == "SignatureValidationFailed" && strings.HasPrefix(w.Message, want):
			return nil
		default:
			return fmt.Errorf("waiting %s: %s", w.Reason, w.Message)
		}
	})
	pod := d.WaitRunning("signed", 60*time.Second)
	if cs := statusOf(pod); cs.ImageID != signedRef {
		t.Errorf("signed pod's imageID %s, want the verified %s", cs.ImageID, signedRef)
	}
	// The kubelet's event carries the runtime's error as it is.
	if out := d.CLI("events"); !strings.Contains(out, fmt.Sprintf("Failed to pull image %q: SignatureValidationFailed: ", unsigned)) {
		t.Errorf("no Failed event for the refused image:\n%s", out)
	}
	if out := d.CLI("images", "ls", "-o", "json"); strings.Contains(out, "team/unsigned") || strings.Contains(out, unsignedID) {
		t.Errorf("the refused image is in the store:\n%s", out)
	}
	index, err := os.ReadFile(filepath.Join(d.RootDir, "images", "index.json"))
	if err != nil || strings.Contains(string(index), unsignedID) || strings.Contains(string(index), "team/unsigned") {
		t.Errorf("the refused image is in the store's index (%v):\n%s", err, index)
	}
}

// policyKey makes a signing key in dir, and returns its signer and the path
// of its public key.
func policyKey(t *testing.T, dir string) (*sign.Signer, string) {
	t.Helper()
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
	return s, pubPath
}
