package image

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// Bounds on what a refusal says of the signatures that could not be read:
// registries write the reasons.
const (
	maxSkipped     = 8
	maxSkippedText = 256
)

// maxReferrerSize bounds a referrer's manifest, as any manifest's.
const maxReferrerSize = maxManifestSize

// admit decides whether the image that norm resolved to at an endpoint
// (digest, in the endpoint's repository repo) may enter the store, on the
// signatures the same endpoint has for it, read with the pull's options
// (credentials, transport, deadline) and only when the policy reads any. A
// refusal's error is the policy's, whose text starts with
// SignatureValidationFailed, followed by the repository digest refused and
// the signatures that could not be read.
func (p *Puller) admit(ctx context.Context, repo name.Repository, norm, repoDigest string, digest v1.Hash, opts []remote.Option) (admitted, error) {
	img := policy.Image{Transport: policy.TransportDocker, Scope: norm, Reference: norm, Digest: digest.String()}
	var skipped []string
	if p.store.Policy().NeedsSignatures(policy.TransportDocker, norm) {
		img.Signatures, skipped = fetchSignatures(repo, digest, opts)
		// A pull cancelled or out of time failed; it was not refused.
		if err := ctx.Err(); err != nil {
			return admitted{}, context.Cause(ctx)
		}
	}
	v, err := p.store.admit(ctx, img)
	if err != nil {
		what := repoDigest
		if len(skipped) > 0 {
			what += "; signatures not read: " + strings.Join(skipped, "; ")
		}
		return admitted{}, fmt.Errorf("%w (%s)", err, what)
	}
	return admitted{img: img, verdict: v}, nil
}

// fetchSignatures reads the signatures of digest that repo has: cosign's
// signature image at the tag scheme's tag, and the sigstore bundles among
// the manifests that refer to digest (the OCI referrers API, or its tag
// schema where the registry has no such API). None is no error; what cannot
// be read is skipped, with a bounded reason each.
func fetchSignatures(repo name.Repository, digest v1.Hash, opts []remote.Option) ([]policy.Signature, []string) {
	var sigs []policy.Signature
	var skipped skips
	if tag, err := policy.SignatureTag(digest.String()); err != nil {
		skipped.add("tag scheme", err)
	} else if s, err := tagSignatures(repo.Tag(tag), opts); err != nil {
		skipped.add("tag "+tag, err)
	} else {
		sigs = append(sigs, s...)
	}
	s, err := referrerSignatures(repo.Digest(digest.String()), opts, &skipped)
	if err != nil {
		skipped.add("referrers", err)
	}
	return append(sigs, s...), skipped.reasons
}

// tagSignatures reads the cosign signature image at tag: none if there is
// no such tag.
func tagSignatures(tag name.Tag, opts []remote.Option) ([]policy.Signature, error) {
	desc, err := remote.Get(tag, opts...)
	if notFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, clean(err)
	}
	if !desc.MediaType.IsImage() {
		return nil, fmt.Errorf("media type %s, not an image manifest", bound(string(desc.MediaType)))
	}
	img, err := desc.Image()
	if err != nil {
		return nil, clean(err)
	}
	return policy.ReadSignatureImage(img, "tag "+tag.TagStr())
}

// referrerSignatures reads the sigstore bundles among the referrers of d,
// at most policy.MaxSignatures of them; one that cannot be read is added to
// skipped.
func referrerSignatures(d name.Digest, opts []remote.Option, skipped *skips) ([]policy.Signature, error) {
	idx, err := remote.Referrers(d, opts...)
	if err != nil {
		return nil, clean(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, clean(err)
	}
	var sigs []policy.Signature
	n := 0
	for _, desc := range im.Manifests {
		// Some registries list a referrer under its config's media type,
		// not its artifactType: one with the empty config may be a bundle,
		// which its manifest says.
		maybe := desc.ArtifactType == "" || desc.ArtifactType == string(types.OCIEmptyJSON)
		if desc.ArtifactType != policy.ArtifactTypeBundle && !maybe {
			continue
		}
		if n == policy.MaxSignatures {
			skipped.add("referrers", fmt.Errorf("more than %d candidate sigstore bundles: the rest not read", policy.MaxSignatures))
			break
		}
		n++
		source := "referrer " + desc.Digest.String()
		if desc.Size > maxReferrerSize || desc.Size < 0 {
			skipped.add(source, fmt.Errorf("manifest of %d bytes: more than %d", desc.Size, maxReferrerSize))
			continue
		}
		if !desc.MediaType.IsImage() {
			if !maybe {
				skipped.add(source, fmt.Errorf("media type %s, not an image manifest", bound(string(desc.MediaType))))
			}
			continue
		}
		img, err := remote.Image(d.Context().Digest(desc.Digest.String()), opts...)
		if err != nil {
			skipped.add(source, clean(err))
			continue
		}
		if maybe {
			m, err := img.Manifest()
			if err != nil {
				skipped.add(source, clean(err))
				continue
			}
			if m.ArtifactType != policy.ArtifactTypeBundle {
				continue
			}
		}
		sig, err := policy.ReadBundleArtifact(img, source)
		if err != nil {
			skipped.add(source, clean(err))
			continue
		}
		sigs = append(sigs, sig)
	}
	return sigs, nil
}

// notFound reports whether err is a registry's 404: no such manifest.
func notFound(err error) bool {
	var te *transport.Error
	return errors.As(err, &te) && te.StatusCode == http.StatusNotFound
}

// skips are the reasons signatures were not read, at most maxSkipped of
// them, each cut at about maxSkippedText bytes and printable.
type skips struct{ reasons []string }

func (s *skips) add(source string, err error) {
	switch {
	case len(s.reasons) < maxSkipped:
		s.reasons = append(s.reasons, boundTo(source+": "+err.Error(), maxSkippedText))
	case len(s.reasons) == maxSkipped:
		s.reasons = append(s.reasons, "more not said")
	}
}
