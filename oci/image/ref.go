package image

import (
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
)

// Normalize returns ref the way Docker spells it in full: "nginx" becomes
// "docker.io/library/nginx:latest", "quay.io/a/b@sha256:…" stays a digest reference.
func Normalize(ref string) (string, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return "", fmt.Errorf("parse image reference %q: %w", ref, err)
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
