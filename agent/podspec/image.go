package podspec

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
)

// Docker's reference grammar (distribution/reference, regexp.go), which the
// kubelet applies to a container's image (parsers.ParseImageName). It is checked
// on top of go-containerregistry's parser, which lets through what the grammar
// does not: "../../etc:x" is registry "..", repository "../etc" to it.
//
// Compiled at first use, not at package init: every re-exec of the binary (a
// container's monitor and its init) runs the package inits, and these were
// among the costliest of them.
var (
	domainAndPort = lazyRegexp(`^(?:(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])(?:\.(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]))*|\[[a-fA-F0-9:]+\])(?::[0-9]+)?$`)
	pathComponent = lazyRegexp(`^[a-z0-9]+(?:(?:[._]|__|[-]+)[a-z0-9]+)*$`)
	tagPattern    = lazyRegexp(`^\w[\w.-]{0,127}$`)
	imageIDHex    = lazyRegexp(`^[a-f0-9]{64}$`)
)

// lazyRegexp returns expr compiled at its first call.
func lazyRegexp(expr string) func() *regexp.Regexp {
	return sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(expr) })
}

// nameTotalLengthMax is distribution/reference's limit on [domain/]path.
const nameTotalLengthMax = 255

// NormalizeImage checks an image reference against docker's reference grammar,
// as the kubelet does, and spells it in full the way containerd's CRI does
// (reference/docker.ParseDockerRef): "nginx" is "docker.io/library/nginx:latest",
// "localhost:5000/a/b" is "localhost:5000/a/b:latest", and a reference with a
// digest keeps only the digest. The error says what is wrong with ref.
func NormalizeImage(ref string) (string, error) {
	if err := checkImageRef(ref); err != nil {
		return "", &RefError{Ref: ref, Err: err}
	}
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", &RefError{Ref: ref, Err: err}
	}
	registry := r.Context().RegistryStr()
	if registry == name.DefaultRegistry {
		registry = "docker.io"
	}
	sep := ":"
	if _, ok := r.(name.Digest); ok {
		sep = "@"
	}
	return registry + "/" + r.Context().RepositoryStr() + sep + r.Identifier(), nil
}

// RefError is an invalid image reference. The reference may be an image
// archive's or a manifest's, of any length, and the parser's reasons quote
// it: the message shows nameTotalLengthMax bytes of it and MaxEventMessage
// of the reason.
type RefError struct {
	Ref string
	Err error
}

func (e *RefError) Error() string {
	return "invalid image reference " + quoteRef(e.Ref) + ": " + e.Reason()
}

func (e *RefError) Unwrap() error { return e.Err }

// Reason is what is wrong with the reference, cut to MaxEventMessage.
func (e *RefError) Reason() string { return Truncate(e.Err.Error(), MaxEventMessage) }

// quoteRef quotes ref, cut to the longest name a reference may have.
func quoteRef(ref string) string {
	if len(ref) <= nameTotalLengthMax {
		return strconv.Quote(ref)
	}
	return strconv.Quote(Truncate(ref, nameTotalLengthMax)) + fmt.Sprintf("… (%d bytes)", len(ref))
}

// checkImageRef applies the grammar: [domain[:port]/]path[:tag][@digest]. The
// digest itself go-containerregistry checks (algorithm and length).
func checkImageRef(ref string) error {
	if ref == "" {
		return fmt.Errorf("empty")
	}
	if imageIDHex().MatchString(ref) {
		return fmt.Errorf("a 64-character hexadecimal string is an image ID, not a repository name")
	}
	named, _, _ := strings.Cut(ref, "@")
	if i := strings.LastIndex(named, ":"); i > strings.LastIndex(named, "/") {
		if tag := named[i+1:]; !tagPattern().MatchString(tag) {
			return fmt.Errorf("tag %q is not 1 to 128 letters, digits, '_', '.' or '-' starting with a letter, digit or '_'", tag)
		}
		named = named[:i]
	}
	if len(named) > nameTotalLengthMax {
		return fmt.Errorf("name is %d characters, over %d", len(named), nameTotalLengthMax)
	}
	path := named
	// Docker's rule for the first component being a registry: it has a '.' or a
	// ':', or is localhost.
	if domain, rest, ok := strings.Cut(named, "/"); ok && (strings.ContainsAny(domain, ".:") || domain == "localhost") {
		if !domainAndPort().MatchString(domain) {
			return fmt.Errorf("registry %q is not a host name or [IPv6 address] with an optional :port", domain)
		}
		path = rest
	}
	for _, c := range strings.Split(path, "/") {
		if !pathComponent().MatchString(c) {
			return fmt.Errorf("repository path component %q is not lowercase letters and digits separated by '.', '_', '__' or '-'", c)
		}
	}
	return nil
}
