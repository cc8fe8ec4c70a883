package bundle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	imagespec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/staticpodd/staticpodd/oci/image"
	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// Signer makes signatures with one private key (sign.Signer).
type Signer interface {
	// Cosign signs digest as the image named ref, in cosign's format.
	Cosign(ref, digest string) (policy.Signature, error)
	// Bundle signs digest in a sigstore bundle.
	Bundle(digest string) (policy.Signature, error)
}

// SignOptions tune SignArchive.
type SignOptions struct {
	// Identity is the reference the images are signed as (cosign's
	// docker-reference); "" signs each as its index.json entry names it.
	Identity string
	// Bundle attaches sigstore bundles as referrers instead of adding
	// cosign signatures to the tag-scheme signature image.
	Bundle bool
	// Out is where the signed archive is written ("": over the archive).
	Out string
}

// Signed is one image SignArchive signed.
type Signed struct {
	Ref    string
	Digest string
	Source string // where the signature went: the tag or the referrer
}

// SignArchive adds a signature by s for every image of the OCI archive (a
// tar, plain or gzip, or a layout dir, changed in place) at path into its
// layout (a tar is written again as a plain tar of the layout alone: a
// docker-archive's files beside it are left out), where imports and bundles find it: cosign's tag scheme (a
// sha256-<hex>.sig entry, its signatures kept and this one added), or with
// opts.Bundle a sigstore bundle referrer of the image's manifest.
func SignArchive(ctx context.Context, path string, s Signer, opts SignOptions) ([]Signed, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	dir := path
	if !fi.IsDir() {
		tmp, err := os.MkdirTemp(filepath.Dir(absOr(opts.Out, path)), ".sign-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		dir = filepath.Join(tmp, "layout")
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, err
		}
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		err = extract(ctx, f, dir, DefaultMaxBytes, true)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
			if err := os.WriteFile(filepath.Join(dir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o600); err != nil {
				return nil, err
			}
		}
	} else if opts.Out != "" {
		return nil, errors.New("a layout dir is signed in place: no -o")
	}
	signed, err := signLayout(dir, s, opts)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if fi.IsDir() {
		return signed, nil
	}
	out := absOr(opts.Out, path)
	tmp, err := os.CreateTemp(filepath.Dir(out), "."+filepath.Base(out)+".tmp-")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	err = writeLayoutTar(dir, tmp, false)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), out)
	}
	if err != nil {
		return nil, err
	}
	return signed, nil
}

func absOr(p, def string) string {
	if p == "" {
		p = def
	}
	abs, err := filepath.Abs(p)
	if err != nil {
		return p
	}
	return abs
}

// signLayout signs every image of the layout in dir: each index.json entry
// that is an image or an image index, named, and not itself a signature.
func signLayout(dir string, s Signer, opts SignOptions) ([]Signed, error) {
	lp, err := layout.FromPath(dir)
	if err != nil {
		return nil, err
	}
	ii, err := lp.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return nil, err
	}
	var signed []Signed
	for _, desc := range im.Manifests {
		if isSignatureEntry(dir, desc) || (!desc.MediaType.IsImage() && !desc.MediaType.IsIndex()) {
			continue
		}
		ref := opts.Identity
		if ref == "" {
			ref = entryRef(desc)
		}
		if ref == "" {
			return nil, fmt.Errorf("image %s has no name in index.json: give --identity", desc.Digest)
		}
		norm, err := image.Normalize(ref)
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", desc.Digest, err)
		}
		digest := desc.Digest.String()
		var where string
		if opts.Bundle {
			where, err = attachBundle(lp, s, desc)
		} else {
			where, err = addCosign(lp, s, norm, digest)
		}
		if err != nil {
			return nil, fmt.Errorf("image %s: %w", norm, err)
		}
		signed = append(signed, Signed{Ref: norm, Digest: digest, Source: where})
	}
	if len(signed) == 0 {
		return nil, errors.New("no image to sign in the layout")
	}
	return signed, nil
}

// entryRef is the reference an index.json entry names its image by.
func entryRef(desc v1.Descriptor) string {
	if r := desc.Annotations["io.containerd.image.name"]; r != "" {
		return r
	}
	return desc.Annotations[imagespec.AnnotationRefName]
}

// isSignatureEntry says whether desc is a signature rather than an image:
// a tag-scheme name, cosign's annotation, or a manifest with a subject.
func isSignatureEntry(dir string, desc v1.Descriptor) bool {
	name := desc.Annotations[imagespec.AnnotationRefName]
	if strings.HasPrefix(name, "sha256-") && strings.HasSuffix(name, ".sig") {
		return true
	}
	if desc.Annotations["kind"] == "dev.cosignproject.cosign/sigs" || desc.ArtifactType == policy.ArtifactTypeBundle {
		return true
	}
	if !desc.MediaType.IsImage() {
		return false
	}
	m, err := readManifest(dir, desc.Digest.String())
	return err == nil && m.Subject != nil
}

// addCosign adds a cosign signature of digest as ref to its tag-scheme
// signature image, keeping the signatures it has.
func addCosign(lp layout.Path, s Signer, ref, digest string) (string, error) {
	tag, err := policy.SignatureTag(digest)
	if err != nil {
		return "", err
	}
	// The index as it is now: an image named twice has its signature
	// image replaced by the first name's signing.
	ii, err := lp.ImageIndex()
	if err != nil {
		return "", err
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return "", err
	}
	sig, err := s.Cosign(ref, digest)
	if err != nil {
		return "", err
	}
	sigs := []policy.Signature{sig}
	for _, d := range im.Manifests {
		if d.Annotations[imagespec.AnnotationRefName] != tag {
			continue
		}
		old, err := lp.Image(d.Digest)
		if err != nil {
			return "", err
		}
		have, err := policy.ReadSignatureImage(old, "tag "+tag)
		if err != nil {
			return "", err
		}
		sigs = append(have, sigs...)
	}
	img, err := policy.SignatureImage(sigs)
	if err != nil {
		return "", err
	}
	if err := lp.RemoveDescriptors(match.Annotation(imagespec.AnnotationRefName, tag)); err != nil {
		return "", err
	}
	if err := lp.AppendImage(img, layout.WithAnnotations(map[string]string{imagespec.AnnotationRefName: tag})); err != nil {
		return "", err
	}
	return "tag " + tag, nil
}

// attachBundle attaches a sigstore bundle signature of desc's digest as a
// referrer of it.
func attachBundle(lp layout.Path, s Signer, subject v1.Descriptor) (string, error) {
	sig, err := s.Bundle(subject.Digest.String())
	if err != nil {
		return "", err
	}
	subject.Annotations, subject.Platform = nil, nil
	img, err := policy.BundleArtifact(sig.Payload, subject)
	if err != nil {
		return "", err
	}
	return appendReferrer(lp, img)
}

// appendReferrer writes the referrer img into lp, its index.json entry
// carrying its artifact type.
func appendReferrer(lp layout.Path, img v1.Image) (string, error) {
	if err := lp.WriteImage(img); err != nil {
		return "", err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return "", err
	}
	var m v1.Manifest
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", err
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	mt, err := img.MediaType()
	if err != nil {
		return "", err
	}
	desc := v1.Descriptor{MediaType: mt, Digest: d, Size: int64(len(raw)), ArtifactType: m.ArtifactType}
	if desc.ArtifactType == "" {
		desc.ArtifactType = string(m.Config.MediaType)
	}
	if err := lp.AppendDescriptor(desc); err != nil {
		return "", err
	}
	return "referrer " + d.String(), nil
}
