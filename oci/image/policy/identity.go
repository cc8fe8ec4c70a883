package policy

import (
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// signedIdentity types: how the docker reference a signature claims is
// matched against the image's (containers/image's policy_reference_match.go).
const (
	matchExact             = "matchExact"
	matchRepoDigestOrExact = "matchRepoDigestOrExact"
	matchRepository        = "matchRepository"
	exactReference         = "exactReference"
	exactRepository        = "exactRepository"
	remapIdentity          = "remapIdentity"
)

// identity is a requirement's signedIdentity.
type identity struct {
	kind string
	// reference is exactReference's dockerReference or exactRepository's
	// dockerRepository.
	reference            string
	prefix, signedPrefix string // remapIdentity's
}

// dockerRef is a docker reference spelled in full: name is
// registry/repository ("docker.io/library/busybox"); tag and digest may be
// empty.
type dockerRef struct{ name, tag, digest string }

// parseDockerRef parses s with the grammar pods' images are checked
// against, normalising the name as containers/image does ("busybox" is
// docker.io/library/busybox, index.docker.io is docker.io). Unlike
// podspec.NormalizeImage it adds no tag: a name alone stays one.
func parseDockerRef(s string) (dockerRef, error) {
	n, err := podspec.NormalizeImage(s)
	if err != nil {
		return dockerRef{}, err
	}
	var r dockerRef
	named, digest, hasDigest := strings.Cut(s, "@")
	if hasDigest {
		r.digest = digest
	}
	if i := strings.LastIndex(named, ":"); i > strings.LastIndex(named, "/") {
		r.tag = named[i+1:]
	}
	if i := strings.LastIndex(n, "@"); i >= 0 {
		n = n[:i]
	} else if i := strings.LastIndex(n, ":"); i > strings.LastIndex(n, "/") {
		n = n[:i]
	}
	r.name = n
	return r, nil
}

func (r dockerRef) nameOnly() bool { return r.tag == "" && r.digest == "" }

func (r dockerRef) String() string {
	s := r.name
	if r.tag != "" {
		s += ":" + r.tag
	}
	if r.digest != "" {
		s += "@" + r.digest
	}
	return s
}

// scopeIdentity is the scope an image of the docker transport is looked up
// by first: name:tag or name@digest (containers/image's
// DockerReferenceIdentity; a digest wins over a tag, as the pull is by it).
func (r dockerRef) scopeIdentity() string {
	if r.digest != "" {
		return r.name + "@" + r.digest
	}
	return r.name + ":" + r.tag
}

// dockerNamespaces are the scopes looked up after the reference itself:
// the repository, its parent namespaces up to the registry host, then the
// host's wildcard domains without the port (containers/image's
// DockerReferenceNamespaces).
func dockerNamespaces(repo string) []string {
	var ns []string
	n := repo
	for {
		ns = append(ns, n)
		i := strings.LastIndex(n, "/")
		if i < 0 {
			break
		}
		n = n[:i]
	}
	if i := strings.Index(n, ":"); i >= 0 {
		n = n[:i]
	}
	for {
		i := strings.Index(n, ".")
		if i < 0 {
			break
		}
		n = n[i+1:]
		ns = append(ns, "*."+n)
	}
	return ns
}

// isDomain says whether the first component of a reference is a registry
// host, as docker's grammar tells it from a path component.
func isDomain(s string) bool {
	return strings.ContainsAny(s, ".:") || s == "localhost"
}

// validDockerScope accepts what a docker image is looked up by: a reference
// with a tag or digest, a repository, a namespace or a registry host, all
// spelled in full, or a *.domain wildcard.
func validDockerScope(scope string) error {
	if rest, ok := strings.CutPrefix(scope, "*."); ok {
		if rest == "" || strings.ContainsAny(rest, "/*:@") {
			return fmt.Errorf("%s: a wildcard scope is *.DOMAIN, without a port or a path", quote(scope))
		}
		return nil
	}
	first, _, hasPath := strings.Cut(scope, "/")
	if !isDomain(first) {
		return fmt.Errorf("%s does not start with a registry host: images are looked up by their full name (docker.io/library/busybox, never busybox)", quote(scope))
	}
	if first == "index.docker.io" {
		return fmt.Errorf(`%s: write "docker.io" for Docker Hub`, quote(scope))
	}
	if !hasPath {
		if _, err := name.NewRegistry(scope); err != nil || strings.Contains(scope, "@") {
			return fmt.Errorf("%s is not a registry host", quote(scope))
		}
		return nil
	}
	// Checked as a reference, but not normalised: "docker.io/team" is a
	// namespace, not docker.io/library/team.
	_, err := parseDockerRef(scope)
	return err
}

// validPrefix checks remapIdentity's prefixes: a registry host, or a
// repository or namespace on one, spelled in full.
func validPrefix(s string) error {
	if strings.HasPrefix(s, "*") {
		return fmt.Errorf("%s: a prefix has no wildcard", quote(s))
	}
	if err := validDockerScope(s); err != nil {
		return err
	}
	if strings.Contains(s, "/") {
		if r, _ := parseDockerRef(s); !r.nameOnly() {
			return fmt.Errorf("%s: a prefix has no tag or digest", quote(s))
		}
	}
	return nil
}

// errNoReference is why an identity cannot be matched against an image
// that has no docker reference (an archive without a ref name).
var errNoReference = errors.New("the image has no docker reference to match the signature's identity against; use signedIdentity exactReference or exactRepository")

// matches says whether a signature claiming the identity signed accepts an
// image named intended ("" when it has no name): nil, or why not.
func (id *identity) matches(intended, signed string) error {
	sig, err := parseDockerRef(signed)
	if err != nil {
		return fmt.Errorf("the signature's identity %s is not a docker reference", quote(signed))
	}
	notAccepted := fmt.Errorf("signature for identity %s is not accepted (signedIdentity %s)", quote(signed), id.kind)
	var ok bool
	switch id.kind {
	case exactReference:
		want, _ := parseDockerRef(id.reference) // checked when parsed
		ok = !sig.nameOnly() && sig.String() == want.String()
	case exactRepository:
		want, _ := parseDockerRef(id.reference)
		ok = sig.name == want.name
	default:
		if intended == "" {
			return errNoReference
		}
		img, err := parseDockerRef(intended)
		if err != nil {
			return fmt.Errorf("the image's reference: %w", err)
		}
		switch id.kind {
		case matchExact:
			ok = !img.nameOnly() && !sig.nameOnly() && sig.String() == img.String()
		case matchRepoDigestOrExact:
			ok = repoDigestOrExact(img, sig)
		case matchRepository:
			ok = sig.name == img.name
		case remapIdentity:
			if img, err = id.remap(img); err != nil {
				return err
			}
			ok = repoDigestOrExact(img, sig)
		}
	}
	if !ok {
		if sig.nameOnly() && (id.kind == matchRepoDigestOrExact || id.kind == matchExact) {
			// What cosign sign writes unless told --sign-container-identity.
			return fmt.Errorf("%w: it names the repository alone, as cosign sign does; such signatures need signedIdentity matchRepository", notAccepted)
		}
		return notAccepted
	}
	return nil
}

// repoDigestOrExact is matchRepoDigestOrExact: an image named by tag needs
// a signature for that very tag; one named by digest, a signature for its
// repository (the digest itself is checked against the signature's).
func repoDigestOrExact(img, sig dockerRef) bool {
	switch {
	case sig.nameOnly():
		return false
	case img.tag != "":
		return sig.String() == img.String()
	case img.digest != "":
		return sig.name == img.name
	}
	return false
}

// remap replaces prefix with signedPrefix in img's name, when it starts
// with it at a path boundary.
func (id *identity) remap(img dockerRef) (dockerRef, error) {
	n := img.name
	if n != id.prefix && !(strings.HasPrefix(n, id.prefix) && n[len(id.prefix)] == '/') {
		return img, nil
	}
	r := img
	r.name = id.signedPrefix + n[len(id.prefix):]
	s, err := parseDockerRef(r.String())
	if err != nil {
		return dockerRef{}, fmt.Errorf("remapping %s: %w", quote(img.String()), err)
	}
	return s, nil
}
