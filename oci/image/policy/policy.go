// Package policy decides whether an image may enter the store: the
// containers-policy.json(5) format operators already write for podman and
// CRI-O (default, transports with docker scopes by registry and repository,
// docker-archive and oci-archive for imports; requirements reject,
// insecureAcceptAnything and sigstoreSigned), evaluated against the
// signatures that travel with the image. Signatures are verified offline
// against local public keys with the sigstore project's libraries: cosign's
// simple-signing signatures (the tag scheme, sha256-<hex>.sig) and sigstore
// bundles (OCI referrers). A policy names what it does not implement as an
// error when it is read, never ignores it.
package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// The transports an image arrives by, as containers-transports(5) names them.
const (
	TransportDocker        = "docker"         // a registry pull
	TransportDockerArchive = "docker-archive" // a docker save tarball
	TransportOCIArchive    = "oci-archive"    // an OCI layout, tarred or not
)

// ErrSignatureValidationFailed is the CRI's error for a refused image
// (k8s.io/cri-api/pkg/errors): a refusal's message starts with its text, so
// that the kubelet's wording ("image pull failed for X because the signature
// validation failed: …") and reason follow.
var ErrSignatureValidationFailed = errors.New("SignatureValidationFailed")

// Policy is a parsed containers-policy.json. A nil *Policy accepts everything
// (no imagePolicyFile configured). Its keys are read when it is parsed: a
// changed key file takes effect when the policy is read again.
type Policy struct {
	// Origin is the file it was read from, for messages.
	Origin string

	def        requirements
	transports map[string]map[string]requirements
}

// Signature kinds.
const (
	KindCosign = "cosign" // a simple-signing payload and its signature
	KindBundle = "bundle" // a sigstore bundle (JSON)
)

// Signature is one signature that travels with an image, as fetched.
type Signature struct {
	Kind string
	// Payload is the simple-signing payload (KindCosign) or the bundle's
	// JSON (KindBundle).
	Payload []byte
	// Signature is the raw signature of Payload (KindCosign only).
	Signature []byte
	// Source says where it came from, for messages ("tag sha256-….sig").
	Source string
}

// Image is what a decision is made on.
type Image struct {
	Transport string
	// Scope is what transports' scopes are matched against: for docker the
	// normalised reference (registry/repo:tag or registry/repo@sha256:…),
	// for the archives the archive's absolute path, or "" (stdin).
	Scope string
	// Reference is the docker reference the image is named by, matched
	// against a signature's identity ("" for none): the reference as it
	// was asked for (registry/repo:tag or registry/repo@sha256:…), or the
	// ref name an archive gives it. For the docker transport "" means
	// Scope.
	Reference string
	// Digest is the manifest digest (sha256:…) signatures are over; "" when
	// the image has none (docker-archive).
	Digest     string
	Signatures []Signature
}

// Decision is a verdict's outcome.
type Decision string

const (
	Accepted Decision = "accepted" // insecureAcceptAnything, or no policy
	Verified Decision = "verified" // every requirement met by signatures
	Rejected Decision = "rejected" // a requirement refused it
)

// Verdict is a policy's decision on an image.
type Verdict struct {
	Decision Decision `json:"decision"`
	// By names the keys that verified it ("key cosign.pub"), when Verified.
	By string `json:"by,omitempty"`
	// Reason says why, when Rejected: bounded, without secrets.
	Reason string `json:"reason,omitempty"`
	// Unsigned says a requirement for a signature refused it because it
	// came with none at all (rather than with signatures that failed).
	Unsigned bool `json:"unsigned,omitempty"`
}

// MaxReason bounds a verdict's reason: it ends up in a pod's status message
// and events.
const MaxReason = 512

// Err is nil unless v is Rejected: then an error whose text starts with
// ErrSignatureValidationFailed's and that wraps it.
func (v Verdict) Err() error {
	if v.Decision != Rejected {
		return nil
	}
	return &refusal{reason: v.Reason}
}

// refusal is a Rejected verdict's error: "SignatureValidationFailed: REASON"
// on one line (errors.Join would put a newline into a status message).
type refusal struct{ reason string }

func (e *refusal) Error() string { return ErrSignatureValidationFailed.Error() + ": " + e.reason }
func (e *refusal) Unwrap() error { return ErrSignatureValidationFailed }

// rejected is a refusal whose reason is one line, cut to MaxReason: it
// quotes sources and library errors.
func rejected(format string, args ...any) Verdict {
	reason := strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, fmt.Sprintf(format, args...))
	return Verdict{Decision: Rejected, Reason: podspec.Truncate(reason, MaxReason)}
}

// Evaluate decides on img. A nil policy accepts everything. Every
// requirement of the scope that matches img must be met, as
// containers/image's IsRunningImageAllowed decides.
func (p *Policy) Evaluate(ctx context.Context, img Image) Verdict {
	if p == nil {
		return Verdict{Decision: Accepted}
	}
	reqs, where, err := p.requirementsFor(img.Transport, img.Scope)
	if err != nil {
		return rejected("%v", err)
	}
	if len(reqs) == 0 {
		// Only a Policy not made by Parse has none: fail closed.
		return rejected("the policy %s has no requirements for %s", quote(p.Origin), where)
	}
	if n := len(img.Signatures); n > 2*MaxSignatures {
		return rejected("%d signatures, more than the %d read of an image", n, 2*MaxSignatures)
	}
	var by []string
	for i := range reqs {
		if err := ctx.Err(); err != nil {
			return rejected("%v", err)
		}
		r := &reqs[i]
		switch r.kind {
		case typeInsecureAcceptAnything:
		case typeReject:
			return rejected("the policy rejects images of %s", where)
		case typeSigstoreSigned:
			key, err := r.accepts(ctx, img)
			if err != nil {
				v := rejected("%s requires a signature: %v", index(where, i), err)
				v.Unsigned = len(img.Signatures) == 0
				return v
			}
			by = append(by, "key "+key)
		}
	}
	if len(by) == 0 {
		return Verdict{Decision: Accepted}
	}
	return Verdict{Decision: Verified, By: podspec.Truncate(strings.Join(by, ", "), MaxReason)}
}

// NeedsSignatures says whether a decision on images of this transport and
// scope may read signatures, so that a caller fetches them only then.
func (p *Policy) NeedsSignatures(transport, scope string) bool {
	if p == nil {
		return false
	}
	reqs, _, err := p.requirementsFor(transport, scope)
	if err != nil {
		return false
	}
	signed := false
	for _, r := range reqs {
		switch r.kind {
		case typeReject:
			return false
		case typeSigstoreSigned:
			signed = true
		}
	}
	return signed
}
