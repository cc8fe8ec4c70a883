package image

import (
	"errors"
	"testing"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// A followed tag's new digest is pulled by digest, but judged as the tag
// names it: a signature for another tag of the repository (a dev build,
// by the same key) passes for a digest, not for the tag the pod runs, and
// a pull of the tag itself refuses it.
func TestPullAsFollowedTag(t *testing.T) {
	su := newSignedSetup(t, true)
	signCosign(t, su.reg, "team/app:dev", su.key, su.digest, su.digest)
	byDigest := su.reg.host + "/team/app@" + su.digest
	if _, err := su.puller.Pull(t.Context(), su.ref, nil); !errors.Is(err, policy.ErrSignatureValidationFailed) {
		t.Fatalf("pull of %s, whose image is signed for :dev: %v, want refused", su.ref, err)
	}
	before := stateOf(t, su.store)
	_, err := su.puller.PullWith(t.Context(), byDigest, PullOptions{As: su.ref})
	if !errors.Is(err, policy.ErrSignatureValidationFailed) {
		t.Fatalf("pull of %s as %s followed: %v, want refused as the tag is", byDigest, su.ref, err)
	}
	if after := stateOf(t, su.store); !after.equal(before) {
		t.Fatalf("refused pull changed the store:\nbefore %+v\nafter  %+v", before, after)
	}
	// Signed for the tag, it is pulled, by digest, the tag's reference
	// left as it was.
	signCosign(t, su.reg, "team/app:v1", su.key, su.digest, su.digest)
	img, err := su.puller.PullWith(t.Context(), byDigest, PullOptions{As: su.ref})
	if err != nil {
		t.Fatal(err)
	}
	if img.Digest != su.digest || len(img.Refs) != 1 || img.Refs[0] != byDigest {
		t.Fatalf("pulled %+v: want %s, by its digest alone", img, su.digest)
	}
	if _, err := su.puller.PullWith(t.Context(), byDigest, PullOptions{As: "registry.example/other:v1"}); err == nil {
		t.Fatal("a pull judged as another repository's tag was not refused")
	}
}
