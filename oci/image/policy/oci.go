package policy

import (
	"errors"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Media and artifact types of signatures in registries and OCI layouts.
const (
	// MediaTypeSimpleSigning is the layer type of cosign's signature images.
	MediaTypeSimpleSigning = "application/vnd.dev.cosignproject.cosign.simplesigning.v1+json"
	// AnnotationCosignSignature holds a layer's base64 signature.
	AnnotationCosignSignature = "dev.cosignproject.cosign/signature"
	// ArtifactTypeBundle is a sigstore bundle attached as an OCI referrer.
	ArtifactTypeBundle = "application/vnd.dev.sigstore.bundle.v0.3+json"
)

// Limits on what is read of signatures: a registry, an archive or a bundle
// may be hostile.
const (
	MaxSignatures     = 32        // signatures read per image, of each kind
	MaxSignatureBytes = 256 << 10 // one payload or bundle
)

// SignatureTag is cosign's tag for the signatures of digest: sha256-<hex>.sig.
func SignatureTag(digest string) (string, error) {
	return "", errors.ErrUnsupported
}

// ReadSignatureImage reads the signatures of a cosign signature image
// (the manifest at SignatureTag), bounded by the limits above.
func ReadSignatureImage(img v1.Image, source string) ([]Signature, error) {
	return nil, errors.ErrUnsupported
}

// SignatureImage builds a cosign signature image holding sigs (KindCosign),
// to push at SignatureTag or to write into an OCI layout.
func SignatureImage(sigs []Signature) (v1.Image, error) {
	return nil, errors.ErrUnsupported
}

// ReadBundleArtifact reads the sigstore bundle of a referrer manifest whose
// artifact type is ArtifactTypeBundle, bounded.
func ReadBundleArtifact(img v1.Image, source string) (Signature, error) {
	return Signature{}, errors.ErrUnsupported
}

// BundleArtifact builds the referrer manifest that attaches a sigstore
// bundle (its JSON) to subject.
func BundleArtifact(bundleJSON []byte, subject v1.Descriptor) (v1.Image, error) {
	return nil, errors.ErrUnsupported
}
