package image

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/staticpodd/staticpodd/oci/image/policy"
)

// The annotation cosign save puts on each entry of the OCI layout it writes
// (cosign's pkg/oci/layout), and its values: one image (or image index), its
// signature image and its attestations.
const (
	annotationCosignKind = "kind"
	cosignKindImage      = "dev.cosignproject.cosign/image"
	cosignKindImageIndex = "dev.cosignproject.cosign/imageIndex"
	cosignKindSigs       = "dev.cosignproject.cosign/sigs"
	cosignKindAtts       = "dev.cosignproject.cosign/atts"
)

// signatureTag matches cosign's tag scheme in a reference name: the tag
// sha256-<hex>.sig names the signatures of the manifest sha256:<hex>, alone
// (a layout's ref name) or after a repository (containerd's image name).
var signatureTag = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?:^|:)sha256-([0-9a-f]{64})\.sig$`)
})

// signatureTagSubject says which digest an index entry named by cosign's tag
// scheme holds the signatures of.
func signatureTagSubject(desc v1.Descriptor) (string, bool) {
	for _, key := range []string{annotationContainerdName, annotationRefName} {
		if m := signatureTag().FindStringSubmatch(desc.Annotations[key]); m != nil {
			return "sha256:" + m[1], true
		}
	}
	return "", false
}

// artifactType is a manifest's artifact type as the OCI image spec (1.1)
// defines it: its own field, else its config's media type. The index entry's
// copy is only a hint, taken when the manifest has neither.
func artifactType(desc v1.Descriptor, m *v1.Manifest) string {
	if m.ArtifactType != "" {
		return m.ArtifactType
	}
	if desc.ArtifactType != "" {
		return desc.ArtifactType
	}
	return string(m.Config.MediaType)
}

// isBundleReferrer says whether a referrer may hold a sigstore bundle: its
// artifact type is one of any bundle version (cosign reads them all);
// policy.ReadBundleArtifact decides on the rest.
func isBundleReferrer(desc v1.Descriptor, m *v1.Manifest) bool {
	return strings.HasPrefix(artifactType(desc, m), "application/vnd.dev.sigstore.bundle")
}

// layoutSignatures collects the signature manifests an OCI layout carries, by
// the manifest digest they are for: cosign signature images (tag scheme, or
// cosign save's sigs entry) and sigstore bundle referrers. An archive is
// hostile: at most policy.MaxSignatures manifests of each kind are kept per
// digest, and only those for the layout's images are read (of), each bounded
// by policy's readers. A signature that cannot be read is no signature; what
// was wrong with it is kept for a refusal's message.
type layoutSignatures struct {
	ii      v1.ImageIndex
	pending map[string][]pendingSignature
	count   map[string]int // manifests kept, by digest and kind
}

type pendingSignature struct {
	kind string
	desc v1.Descriptor
	img  v1.Image // a bundle referrer, read already to find its subject
}

func newLayoutSignatures(ii v1.ImageIndex) *layoutSignatures {
	return &layoutSignatures{ii: ii, pending: map[string][]pendingSignature{}, count: map[string]int{}}
}

// add keeps a signature manifest of kind for subject, within the bound.
func (ls *layoutSignatures) add(subject string, p pendingSignature) {
	key := subject + " " + p.kind
	if ls.count[key] >= policy.MaxSignatures {
		return
	}
	ls.count[key]++
	ls.pending[subject] = append(ls.pending[subject], p)
}

func (ls *layoutSignatures) addCosign(desc v1.Descriptor, subject string) {
	if desc.MediaType.IsImage() {
		ls.add(subject, pendingSignature{kind: policy.KindCosign, desc: desc})
	}
}

func (ls *layoutSignatures) addBundle(img v1.Image, desc v1.Descriptor, subject string) {
	ls.add(subject, pendingSignature{kind: policy.KindBundle, desc: desc, img: img})
}

// of reads the signatures for digest, at most policy.MaxSignatures of each
// kind, and says what could not be read.
func (ls *layoutSignatures) of(digest string) ([]policy.Signature, []error) {
	var out []policy.Signature
	var errs []error
	for _, p := range ls.pending[digest] {
		sigs, err := ls.read(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, sigs...)
	}
	var kept []policy.Signature
	perKind := map[string]int{}
	for _, sig := range out {
		if perKind[sig.Kind] < policy.MaxSignatures {
			perKind[sig.Kind]++
			kept = append(kept, sig)
		}
	}
	return kept, errs
}

func (ls *layoutSignatures) read(p pendingSignature) ([]policy.Signature, error) {
	if p.kind == policy.KindBundle {
		source := "OCI layout referrer " + p.desc.Digest.String()
		sig, err := policy.ReadBundleArtifact(p.img, source)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		return []policy.Signature{sig}, nil
	}
	source := "OCI layout signature image " + p.desc.Digest.String()
	img, err := ls.ii.Image(p.desc.Digest)
	if err == nil {
		err = verifyManifest(img, p.desc.Digest)
	}
	var sigs []policy.Signature
	if err == nil {
		sigs, err = policy.ReadSignatureImage(img, source)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return sigs, nil
}
