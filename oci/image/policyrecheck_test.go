package image

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/staticpodd/staticpodd/oci/image/policy"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// TestSetPolicyRecheck: images already in the store are checked again,
// offline, when a policy is set; a refused one stays listed but nothing
// starts from it, until a policy accepts it again.
func TestSetPolicyRecheck(t *testing.T) {
	testroot.Require(t)
	key := newTestKey(t, "cosign")
	s := openStore(t)
	plain := filepath.Join(t.TempDir(), "plain.tar")
	writeOCIArchive(t, plain, map[string]v1.Image{"registry.example/plain:v1": testImage(t, baseEntries)})
	dir := t.TempDir()
	writeSignedLayout(t, dir, "registry.example/signed:v1", testImage(t), signing{key: &key, form: "tag"})
	signed := filepath.Join(t.TempDir(), "signed.tar")
	tarDir(t, dir, signed)
	for _, p := range []string{plain, signed} {
		imgs, err := s.Import(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		if v := imgs[0].Verification; v == nil || v.Decision != policy.Accepted {
			t.Errorf("%s with no policy: %+v, want accepted", p, v)
		}
	}

	refused, err := s.SetPolicy(archivePolicy(t, key.pub))
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 1 || refused[0].Refs[0] != "registry.example/plain:v1" {
		t.Fatalf("refused %+v, want the unsigned image", refused)
	}
	got, err := s.Get("registry.example/plain:v1")
	if err != nil {
		t.Fatalf("refused image no longer listed: %v", err)
	}
	if v := got.Verification; v == nil || v.Decision != policy.Rejected || v.Reason == "" {
		t.Errorf("verification %+v, want rejected with a reason", v)
	}
	if got, err := s.Get("registry.example/signed:v1"); err != nil || got.Verification == nil || got.Verification.Decision != policy.Verified {
		t.Errorf("signed image: %+v, %v: want verified from its kept signatures", got.Verification, err)
	}
	_, _, err = s.Prepare("c1", "registry.example/plain:v1")
	if err == nil {
		s.Release("c1")
		t.Fatal("Prepare of a refused image succeeded")
	}
	if !strings.HasPrefix(err.Error(), "SignatureValidationFailed: ") || !errors.Is(err, policy.ErrSignatureValidationFailed) {
		t.Errorf("Prepare: %q, want a SignatureValidationFailed error", err)
	}
	if _, err := os.Stat(s.snapshotDir("c1")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused Prepare left a snapshot: %v", err)
	}
	if _, _, err := s.Prepare("c2", "registry.example/signed:v1"); err != nil {
		t.Errorf("Prepare of the verified image: %v", err)
	} else {
		s.Release("c2")
	}

	// A store opened afresh (the CLI beside the daemon) sees the verdicts.
	s2, err := Open(s.Root(), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s2.Prepare("c3", "registry.example/plain:v1"); !errors.Is(err, policy.ErrSignatureValidationFailed) {
		t.Errorf("Prepare through another Store: %v", err)
	}

	if refused, err := s.SetPolicy(nil); err != nil || len(refused) != 0 {
		t.Fatalf("SetPolicy(nil): %+v, %v", refused, err)
	}
	if got, err := s.Get("registry.example/plain:v1"); err != nil || got.Verification == nil || got.Verification.Decision != policy.Accepted {
		t.Errorf("after the policy is gone: %+v, %v: want accepted", got.Verification, err)
	}
	if _, _, err := s.Prepare("c4", "registry.example/plain:v1"); err != nil {
		t.Errorf("Prepare with no policy: %v", err)
	} else {
		s.Release("c4")
	}
}

// TestPolicySetDuringArrival: an image admitted under one policy and
// committed after a stricter one was set is decided on again, and refused,
// with the store left as it was.
func TestPolicySetDuringArrival(t *testing.T) {
	testroot.Require(t)
	key := newTestKey(t, "cosign")
	img := testImage(t)
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	src := layoutSource(img, []string{"registry.example/app:v1"})
	src.admitted.img = policy.Image{Transport: policy.TransportOCIArchive, Reference: "registry.example/app:v1", Digest: d.String()}
	if src.admitted.verdict, err = s.admit(context.Background(), src.admitted.img); err != nil {
		t.Fatal(err)
	}
	if _, err := s.SetPolicy(archivePolicy(t, key.pub)); err != nil {
		t.Fatal(err)
	}
	before := treeDigest(t, s.Root())
	if _, err := s.importSources(context.Background(), "test-", []source{src}, nil); !errors.Is(err, policy.ErrSignatureValidationFailed) {
		t.Fatalf("import admitted before the policy: %v, want refused", err)
	}
	if after := treeDigest(t, s.Root()); after != before {
		t.Errorf("store changed:\n%s\nwant\n%s", after, before)
	}
}

// TestSetPolicyRecheckPulled: a pulled image is checked again under the
// docker transport, by each of its references (or, with none left, its
// repo digests), with the signatures it was pulled with; one the store got
// before it recorded transports counts as pulled by its repo digest.
func TestSetPolicyRecheckPulled(t *testing.T) {
	key := newTestKey(t, "cosign")
	s := openStore(t)
	const (
		signedID   = "sha256:1111111111111111111111111111111111111111111111111111111111111111"
		unsignedID = "sha256:2222222222222222222222222222222222222222222222222222222222222222"
		oldID      = "sha256:3333333333333333333333333333333333333333333333333333333333333333"
		digest     = "sha256:4444444444444444444444444444444444444444444444444444444444444444"
	)
	sig, err := key.signer.Cosign("registry.example/team/app:v1", digest)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.keepSignatures(digest, []policy.Signature{sig}); err != nil {
		t.Fatal(err)
	}
	idx := index{Images: []Image{
		{ID: signedID, Refs: []string{"registry.example/team/app:v1"}, RepoDigests: []string{"registry.example/team/app@" + digest}, Digest: digest, Transport: policy.TransportDocker},
		// The tag moved off it: what names it still is its repo digest.
		{ID: unsignedID, RepoDigests: []string{"registry.example/team/app@sha256:5555555555555555555555555555555555555555555555555555555555555555"},
			Digest: "sha256:5555555555555555555555555555555555555555555555555555555555555555", Transport: policy.TransportDocker},
		{ID: oldID, Refs: []string{"other.example/app:v1"}, RepoDigests: []string{"other.example/app@" + digest}},
	}}
	if err := s.writeIndexLocked(idx); err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse(fmt.Appendf(nil, `{"default": [{"type": "insecureAcceptAnything"}], "transports": {"docker": {
		"registry.example/team": [{"type": "sigstoreSigned", "keyPath": %q}], "other.example": [{"type": "reject"}]}}}`, key.pub), "policy.json")
	if err != nil {
		t.Fatal(err)
	}
	refused, err := s.SetPolicy(p)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]policy.Decision{signedID: policy.Verified, unsignedID: policy.Rejected, oldID: policy.Rejected}
	imgs, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	for _, img := range imgs {
		if v := img.Verification; v == nil || v.Decision != want[img.ID] {
			t.Errorf("%s %v: %+v, want %s", img.ID[:16], img.Refs, v, want[img.ID])
		}
	}
	if len(refused) != 2 {
		t.Errorf("refused %d images, want 2", len(refused))
	}
}
