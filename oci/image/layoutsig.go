package image

import (
	"fmt"
	"regexp"

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
var signatureTag = regexp.MustCompile(`(?:^|:)sha256-([0-9a-f]{64})\.sig$`)

// signatureTagSubject says which digest an index entry named by cosign's tag
// scheme holds the signatures of.
func signatureTagSubject(desc v1.Descriptor) (string, bool) {
	for _, key := range []string{annotationContainerdName, annotationRefName} {
		if m := signatureTag.FindStringSubmatch(desc.Annotations[key]); m != nil {
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

// layoutSignatures collects the signatures an OCI layout carries, by the
// manifest digest they are for: cosign signature images (tag scheme, or
// cosign save's sigs entry) and sigstore bundle referrers. An archive is
// hostile: at most policy.MaxSignatures manifests of each kind are read per
// digest, each bounded by policy's readers. A signature that cannot be read
// is no signature; what was wrong with it is kept for the refusal's message.
type layoutSignatures struct {
	ii    v1.ImageIndex
	sigs  map[string][]policy.Signature
	errs  map[string][]error
	count map[string]int // manifests read, by digest and kind
}

func newLayoutSignatures(ii v1.ImageIndex) *layoutSignatures {
	return &layoutSignatures{ii: ii, sigs: map[string][]policy.Signature{}, errs: map[string][]error{}, count: map[string]int{}}
}

// take counts one more signature manifest of kind for subject, and says
// whether it is still within the bound.
func (ls *layoutSignatures) take(subject, kind string) bool {
	key := subject + " " + kind
	if ls.count[key] >= policy.MaxSignatures {
		return false
	}
	ls.count[key]++
	return true
}

func (ls *layoutSignatures) addCosign(desc v1.Descriptor, subject string) {
	if !desc.MediaType.IsImage() || !ls.take(subject, policy.KindCosign) {
		return
	}
	source := "OCI layout signature image " + desc.Digest.String()
	img, err := ls.ii.Image(desc.Digest)
	if err == nil {
		err = verifyManifest(img, desc.Digest)
	}
	var sigs []policy.Signature
	if err == nil {
		sigs, err = policy.ReadSignatureImage(img, source)
	}
	if err != nil {
		ls.errs[subject] = append(ls.errs[subject], fmt.Errorf("%s: %w", source, err))
		return
	}
	ls.sigs[subject] = append(ls.sigs[subject], sigs...)
}

func (ls *layoutSignatures) addBundle(img v1.Image, desc v1.Descriptor, subject string) {
	if !ls.take(subject, policy.KindBundle) {
		return
	}
	source := "OCI layout referrer " + desc.Digest.String()
	sig, err := policy.ReadBundleArtifact(img, source)
	if err != nil {
		ls.errs[subject] = append(ls.errs[subject], fmt.Errorf("%s: %w", source, err))
		return
	}
	ls.sigs[subject] = append(ls.sigs[subject], sig)
}

// of returns the signatures for digest, at most policy.MaxSignatures of each
// kind, and what could not be read.
func (ls *layoutSignatures) of(digest string) ([]policy.Signature, []error) {
	var out []policy.Signature
	perKind := map[string]int{}
	for _, sig := range ls.sigs[digest] {
		if perKind[sig.Kind] < policy.MaxSignatures {
			perKind[sig.Kind]++
			out = append(out, sig)
		}
	}
	return out, ls.errs[digest]
}
