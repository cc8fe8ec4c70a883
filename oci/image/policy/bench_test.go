package policy_test

import (
	"context"
	"testing"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// BenchmarkEvaluate is what a decision costs an arrival, by what the policy
// asks of it: nothing (no policy), insecureAcceptAnything, and sigstoreSigned
// met by a cosign signature or by a sigstore bundle, each with one good
// signature; and a refusal that tries four signatures by another key.
func BenchmarkEvaluate(b *testing.B) {
	dir := b.TempDir()
	s := newSigner(b, dir, "a.pub")
	other := newSigner(b, b.TempDir(), "other.pub")
	signed := signedPolicy(b, `"keyPath": "`+dir+`/a.pub"`, "")
	accept := parse(b, `{"default": [{"type": "insecureAcceptAnything"}]}`)
	img := func(sigs ...policy.Signature) policy.Image {
		return policy.Image{Transport: policy.TransportDocker, Scope: refA, Reference: refA, Digest: digestA, Signatures: sigs}
	}
	bad := cosign(b, other, refA, digestA)
	for _, c := range []struct {
		name string
		p    *policy.Policy
		img  policy.Image
		want policy.Decision
	}{
		{"none", nil, img(), policy.Accepted},
		{"insecureAcceptAnything", accept, img(), policy.Accepted},
		{"cosign", signed, img(cosign(b, s, refA, digestA)), policy.Verified},
		{"bundle", signed, img(bundleSig(b, s, digestA)), policy.Verified},
		{"refused-4", signed, img(bad, bad, bad, bad), policy.Rejected},
	} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				if v := c.p.Evaluate(ctx, c.img); v.Decision != c.want {
					b.Fatalf("%s: %+v", c.name, v)
				}
			}
		})
	}
}
