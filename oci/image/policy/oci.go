package policy

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/opencontainers/go-digest"
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

// The annotations cosign puts on a bundle's referrer manifest
// (pkg/oci/remote's WriteAttestationNewBundleFormat), which its tree
// command reads.
const (
	annotationBundleContent       = "dev.sigstore.bundle.content"
	annotationBundlePredicateType = "dev.sigstore.bundle.predicateType"
)

// mediaTypeEmpty is the OCI empty descriptor's media type: an artifact's
// config, "{}".
const mediaTypeEmpty = "application/vnd.oci.empty.v1+json"

// Limits on what is read of signatures: a registry, an archive or a bundle
// may be hostile.
const (
	MaxSignatures     = 32        // signatures read per image, of each kind
	MaxSignatureBytes = 256 << 10 // one payload or bundle
)

// SignatureTag is cosign's tag for the signatures of digest: sha256-<hex>.sig.
func SignatureTag(d string) (string, error) {
	parsed, err := digest.Parse(d)
	if err != nil {
		return "", fmt.Errorf("digest %s: %w", quote(d), err)
	}
	return parsed.Algorithm().String() + "-" + parsed.Encoded() + ".sig", nil
}

// ReadSignatureImage reads the signatures of a cosign signature image
// (the manifest at SignatureTag), bounded by the limits above: each layer
// of MediaTypeSimpleSigning is a payload, its annotation the base64
// signature; layers of other types are not signatures and are skipped.
func ReadSignatureImage(img v1.Image, source string) ([]Signature, error) {
	m, err := img.Manifest()
	if err != nil {
		return nil, err
	}
	if n := len(m.Layers); n > MaxSignatures {
		return nil, fmt.Errorf("%d layers, more than the %d signatures read of an image", n, MaxSignatures)
	}
	var sigs []Signature
	for i, l := range m.Layers {
		if l.MediaType != MediaTypeSimpleSigning {
			continue
		}
		b64, ok := l.Annotations[AnnotationCosignSignature]
		if !ok {
			return nil, fmt.Errorf("layer %d: no %s annotation", i, AnnotationCosignSignature)
		}
		if len(b64) > base64.StdEncoding.EncodedLen(MaxSignatureBytes) {
			return nil, fmt.Errorf("layer %d: signature larger than %d bytes", i, MaxSignatureBytes)
		}
		raw, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("layer %d: signature annotation is not base64", i)
		}
		payload, err := readBlob(img, l)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		sigs = append(sigs, Signature{Kind: KindCosign, Payload: payload, Signature: raw, Source: fmt.Sprintf("%s layer %d", source, i)})
	}
	return sigs, nil
}

// readBlob reads the layer desc of img, at most MaxSignatureBytes, and
// checks it against its digest and size whatever the source does.
func readBlob(img v1.Image, desc v1.Descriptor) ([]byte, error) {
	if desc.Size < 0 || desc.Size > MaxSignatureBytes {
		return nil, fmt.Errorf("%d bytes, more than %d", desc.Size, MaxSignatureBytes)
	}
	if desc.Digest.Algorithm != "sha256" {
		return nil, fmt.Errorf("digest algorithm %s", quote(desc.Digest.Algorithm))
	}
	l, err := img.LayerByDigest(desc.Digest)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, desc.Size+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) != desc.Size {
		return nil, fmt.Errorf("blob %s is not of its size %d", desc.Digest, desc.Size)
	}
	if h, _, _ := v1.SHA256(bytes.NewReader(data)); h != desc.Digest {
		return nil, fmt.Errorf("blob %s does not match its digest", desc.Digest)
	}
	return data, nil
}

// SignatureImage builds a cosign signature image holding sigs (KindCosign),
// to push at SignatureTag or to write into an OCI layout: the image cosign
// makes (pkg/oci/empty's Signatures and mutate's AppendSignatures): an OCI
// manifest and config, one layer of MediaTypeSimpleSigning per signature,
// the payload, annotated with its base64 signature.
func SignatureImage(sigs []Signature) (v1.Image, error) {
	if len(sigs) > MaxSignatures {
		return nil, fmt.Errorf("%d signatures, more than %d", len(sigs), MaxSignatures)
	}
	adds := make([]mutate.Addendum, 0, len(sigs))
	for i, s := range sigs {
		if s.Kind != KindCosign {
			return nil, fmt.Errorf("signature %d: a %s signature in a cosign signature image", i, quote(s.Kind))
		}
		if len(s.Payload) > MaxSignatureBytes || len(s.Signature) > MaxSignatureBytes {
			return nil, fmt.Errorf("signature %d: larger than %d bytes", i, MaxSignatureBytes)
		}
		adds = append(adds, mutate.Addendum{
			Layer:       static.NewLayer(s.Payload, MediaTypeSimpleSigning),
			Annotations: map[string]string{AnnotationCosignSignature: base64.StdEncoding.EncodeToString(s.Signature)},
		})
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	return mutate.Append(base, adds...)
}

// ReadBundleArtifact reads the sigstore bundle of a referrer manifest whose
// artifact type is ArtifactTypeBundle (or, without one, whose config's
// media type is, as the referrers API reads it), bounded: its one layer.
func ReadBundleArtifact(img v1.Image, source string) (Signature, error) {
	m, err := img.Manifest()
	if err != nil {
		return Signature{}, err
	}
	at := m.ArtifactType
	if at == "" {
		at = string(m.Config.MediaType)
	}
	if at != ArtifactTypeBundle {
		return Signature{}, fmt.Errorf("artifact type %s is not a sigstore bundle's", quote(at))
	}
	if len(m.Layers) != 1 {
		return Signature{}, fmt.Errorf("%d layers: a sigstore bundle's referrer has one", len(m.Layers))
	}
	l := m.Layers[0]
	if l.MediaType != ArtifactTypeBundle {
		return Signature{}, fmt.Errorf("layer of media type %s, not a sigstore bundle", quote(string(l.MediaType)))
	}
	data, err := readBlob(img, l)
	if err != nil {
		return Signature{}, err
	}
	return Signature{Kind: KindBundle, Payload: data, Source: source}, nil
}

// BundleArtifact builds the referrer manifest that attaches a sigstore
// bundle (its JSON) to subject, as cosign attaches one (sign or attach
// with --new-bundle-format): an OCI manifest of artifact type
// ArtifactTypeBundle, the empty config, one layer holding the bundle, and
// cosign's annotations but the creation time, so that the same bundle
// makes the same manifest.
func BundleArtifact(bundleJSON []byte, subject v1.Descriptor) (v1.Image, error) {
	if len(bundleJSON) > MaxSignatureBytes {
		return nil, fmt.Errorf("a bundle of %d bytes, more than %d", len(bundleJSON), MaxSignatureBytes)
	}
	var content struct {
		DSSE json.RawMessage `json:"dsseEnvelope"`
	}
	if err := json.Unmarshal(bundleJSON, &content); err != nil {
		return nil, errors.New("the bundle is not a JSON object")
	}
	ann := map[string]string{annotationBundleContent: "message-signature"}
	if content.DSSE != nil {
		ann = map[string]string{annotationBundleContent: "dsse-envelope", annotationBundlePredicateType: CosignSignPredicateType}
	}
	a := &artifact{config: []byte("{}"), layer: bundleJSON}
	configDigest, _, _ := v1.SHA256(bytes.NewReader(a.config))
	layerDigest, _, _ := v1.SHA256(bytes.NewReader(a.layer))
	m := v1.Manifest{
		SchemaVersion: 2,
		MediaType:     types.OCIManifestSchema1,
		ArtifactType:  ArtifactTypeBundle,
		Config:        v1.Descriptor{MediaType: mediaTypeEmpty, Digest: configDigest, Size: int64(len(a.config))},
		Layers:        []v1.Descriptor{{MediaType: ArtifactTypeBundle, Digest: layerDigest, Size: int64(len(a.layer))}},
		Subject:       &v1.Descriptor{MediaType: subject.MediaType, Digest: subject.Digest, Size: subject.Size},
		Annotations:   ann,
	}
	var err error
	if a.manifest, err = json.Marshal(m); err != nil {
		return nil, err
	}
	a.configDigest, a.layerDigest = configDigest, layerDigest
	return partial.CompressedToImage(a)
}

// artifact is a referrer manifest with its two blobs, as a v1.Image.
type artifact struct {
	manifest, config, layer   []byte
	configDigest, layerDigest v1.Hash
}

func (a *artifact) RawConfigFile() ([]byte, error)      { return a.config, nil }
func (a *artifact) MediaType() (types.MediaType, error) { return types.OCIManifestSchema1, nil }
func (a *artifact) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *artifact) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	switch h {
	case a.layerDigest:
		return static.NewLayer(a.layer, ArtifactTypeBundle), nil
	case a.configDigest:
		return static.NewLayer(a.config, mediaTypeEmpty), nil
	}
	return nil, fmt.Errorf("blob %s is not in the bundle's referrer", h)
}
