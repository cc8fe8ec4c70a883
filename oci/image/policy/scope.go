package policy

import (
	"fmt"
	"path/filepath"
	"strings"
)

// requirementsFor finds the requirements of an image of transport and
// scope as containers/image's requirementsForImageRef does: the transport's
// section for the scope itself, then for each of its parent namespaces,
// then the transport's "" section, then default. where names the section
// found, for messages.
func (p *Policy) requirementsFor(transport, scope string) (reqs requirements, where string, err error) {
	var candidates []string
	switch transport {
	case TransportDocker:
		r, err := parseDockerRef(scope)
		if err != nil {
			return nil, "", err
		}
		if r.nameOnly() {
			r.tag = "latest" // as the pull resolves it
		}
		candidates = append([]string{r.scopeIdentity()}, dockerNamespaces(r.name)...)
	case TransportOCIArchive:
		if scope != "" {
			if !filepath.IsAbs(scope) {
				return nil, "", fmt.Errorf("archive path %s is not absolute", quote(scope))
			}
			candidates = pathScopes(filepath.Clean(scope))
		}
	case TransportDockerArchive:
		// Only the default "" scope: a docker archive names no image
		// reliably (containers/image's docker-archive transport).
	default:
		return nil, "", fmt.Errorf("unknown transport %s", quote(transport))
	}
	section := field("transports", transport)
	if scopes, ok := p.transports[transport]; ok {
		for _, c := range candidates {
			if reqs, ok := scopes[c]; ok {
				return reqs, field(section, c), nil
			}
		}
		if reqs, ok := scopes[""]; ok {
			return reqs, field(section, ""), nil
		}
	}
	return p.def, "default", nil
}

// pathScopes are an archive's path and its parent directories, "/" left
// out: it is what "" means (containers/image's oci-archive namespaces).
func pathScopes(path string) []string {
	var s []string
	for path != "/" {
		s = append(s, path)
		i := strings.LastIndex(path, "/")
		if i <= 0 {
			break
		}
		path = path[:i]
	}
	return s
}
