package bundle

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// Push pushes the bundle to ref's repository: its images by digest, their
// signatures (tag scheme and referrers), the bundle's signature referrer,
// and the bundle manifest at ref.
func (c *Created) Push(ctx context.Context, ref name.Reference, opts ...remote.Option) error {
	opts = append([]remote.Option{remote.WithContext(ctx)}, opts...)
	lp, err := layout.FromPath(c.Layout)
	if err != nil {
		return err
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		return err
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return err
	}
	repo := ref.Context()
	var bundleImg v1.Image
	// Images first, referrers next, the bundle manifest last: a reader of
	// ref finds everything it names already there.
	var referrers []v1.Image
	for _, d := range im.Manifests {
		if d.MediaType.IsIndex() {
			idx, err := ii.ImageIndex(d.Digest)
			if err != nil {
				return err
			}
			if err := remote.WriteIndex(repo.Digest(d.Digest.String()), idx, opts...); err != nil {
				return fmt.Errorf("image %s: %w", d.Digest, err)
			}
			continue
		}
		img, err := ii.Image(d.Digest)
		if err != nil {
			return err
		}
		m, err := readManifest(c.Layout, d.Digest.String())
		if err != nil {
			return err
		}
		var to name.Reference = repo.Digest(d.Digest.String())
		switch {
		case d.Digest.String() == c.Digest:
			bundleImg = img
			continue
		case m.Subject != nil:
			referrers = append(referrers, img)
			continue
		case isSignatureEntry(c.Layout, d):
			to = repo.Tag(d.Annotations[imagespec.AnnotationRefName])
		}
		if err := remote.Write(to, img, opts...); err != nil {
			return fmt.Errorf("%s: %w", to, err)
		}
	}
	for _, img := range referrers {
		d, err := img.Digest()
		if err != nil {
			return err
		}
		if err := remote.Write(repo.Digest(d.String()), img, opts...); err != nil {
			return fmt.Errorf("referrer %s: %w", d, err)
		}
	}
	if bundleImg == nil {
		return fmt.Errorf("no bundle manifest %s in the layout", c.Digest)
	}
	return remote.Write(ref, bundleImg, opts...)
}

// pullBundle fetches the bundle manifest at the OCI reference src, its
// metadata, manifest files and signature referrers into the layout dir:
// what verify needs. Its images are fetched once the bundle is verified
// (pullImages), so that an unsigned bundle costs no image download.
func pullBundle(ctx context.Context, src, dir string, opts ApplyOptions) (policy.Image, error) {
	ref, err := name.ParseReference(src)
	if err != nil {
		return policy.Image{}, fmt.Errorf("neither a file, an http(s) URL nor an OCI reference: %w", err)
	}
	ropts := append([]remote.Option{remote.WithContext(ctx)}, opts.Remote...)
	desc, err := remote.Get(ref, ropts...)
	if err != nil {
		return policy.Image{}, err
	}
	if desc.Size > MaxJSONBytes || len(desc.Manifest) > MaxJSONBytes {
		return policy.Image{}, fmt.Errorf("manifest: more than %d bytes", MaxJSONBytes)
	}
	var m v1.Manifest
	if err := json.Unmarshal(desc.Manifest, &m); err != nil || m.ArtifactType != ArtifactType {
		return policy.Image{}, fmt.Errorf("not a bundle: %s is no manifest of artifact type %s", ref, ArtifactType)
	}
	if m.Config.Size > MaxJSONBytes || len(m.Layers) != 1 || m.Layers[0].Size > MaxManifestsBytes+int64(MaxManifests+2)*1536 {
		return policy.Image{}, fmt.Errorf("bundle manifest %s: metadata or manifest files too large, or not one layer", desc.Digest)
	}
	if err := os.Remove(dir); err != nil {
		return policy.Image{}, err
	}
	lp, err := layout.Write(dir, empty.Index)
	if err != nil {
		return policy.Image{}, err
	}
	img, err := desc.Image()
	if err != nil {
		return policy.Image{}, err
	}
	if err := lp.WriteImage(img); err != nil {
		return policy.Image{}, err
	}
	if err := lp.AppendDescriptor(v1.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size, ArtifactType: ArtifactType}); err != nil {
		return policy.Image{}, err
	}
	if _, err := pullReferrers(lp, ref.Context().Digest(desc.Digest.String()), ropts); err != nil {
		return policy.Image{}, err
	}
	return policy.Image{Transport: policy.TransportDocker, Scope: ref.Name(), Reference: ref.Context().Name()}, nil
}

// emptyConfig is the OCI image spec's empty descriptor's media type.
const emptyConfig = "application/vnd.oci.empty.v1+json"

// pullReferrers copies the sigstore bundle referrers of d into lp, at most
// policy.MaxSignatures.
func pullReferrers(lp layout.Path, d name.Digest, ropts []remote.Option) (int, error) {
	refs, err := remote.Referrers(d, ropts...)
	if err != nil {
		return 0, fmt.Errorf("referrers of %s: %w", d.DigestStr(), err)
	}
	im, err := refs.IndexManifest()
	if err != nil {
		return 0, fmt.Errorf("referrers of %s: %w", d.DigestStr(), err)
	}
	n := 0
	for _, r := range im.Manifests {
		// A registry that predates artifactType (go-containerregistry's
		// own, for one) lists a referrer by its config's media type: for
		// a sigstore bundle, the empty config's. Its manifest says.
		if r.ArtifactType != policy.ArtifactTypeBundle && r.ArtifactType != emptyConfig {
			continue
		}
		if n++; n > policy.MaxSignatures {
			return n, fmt.Errorf("referrers of %s: more than %d signatures", d.DigestStr(), policy.MaxSignatures)
		}
		if r.Size > MaxJSONBytes {
			return n, fmt.Errorf("referrer %s: more than %d bytes", r.Digest, MaxJSONBytes)
		}
		img, err := remote.Image(d.Context().Digest(r.Digest.String()), ropts...)
		if err != nil {
			return n, fmt.Errorf("referrer %s: %w", r.Digest, err)
		}
		if m, err := img.Manifest(); err != nil || m.ArtifactType != policy.ArtifactTypeBundle {
			continue
		}
		if _, err := appendReferrer(lp, img); err != nil {
			return n, fmt.Errorf("referrer %s: %w", r.Digest, err)
		}
	}
	return n, nil
}

// pullImages fetches the images of b's verified metadata, as they are,
// with their signatures, from the repository of src into b's layout, their
// declared sizes bounded by max.
func (b *verified) pullImages(ctx context.Context, src string, opts ApplyOptions) error {
	ref, err := name.ParseReference(src)
	if err != nil {
		return err
	}
	ropts := append([]remote.Option{remote.WithContext(ctx)}, opts.Remote...)
	lp, err := layout.FromPath(b.dir)
	if err != nil {
		return err
	}
	left := opts.MaxBytes
	copied := map[string]bool{}
	for _, img := range b.md.Images {
		s := imageSource{src: src, ref: ref.Context().Digest(img.Digest), options: ropts, left: &left}
		if _, err := s.pull(lp, layout.WithAnnotations(nil), copied); err != nil {
			return fmt.Errorf("image %s (%s): %w", img.Ref, img.Digest, err)
		}
	}
	raw, err := os.ReadFile(filepath.Join(b.dir, "index.json"))
	if err != nil {
		return err
	}
	var idx v1.IndexManifest
	if err := json.Unmarshal(raw, &idx); err != nil {
		return err
	}
	b.entries = idx.Manifests
	return b.findSubjects()
}
