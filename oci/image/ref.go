package image

import (
	"fmt"
	"regexp"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Normalize checks ref against docker's reference grammar and spells it in full,
// exactly as a pod's image is (podspec.NormalizeImage): "nginx" becomes
// "docker.io/library/nginx:latest", "quay.io/a/b@sha256:…" stays a digest
// reference. References are only ever compared and stored in index.json; no
// path in the store is made from one.
func Normalize(ref string) (string, error) {
	return podspec.NormalizeImage(ref)
}

var sha256Digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// checkDigest refuses a digest that is not sha256:<64 lowercase hex digits>: the
// store makes paths of layer digests (layers/<hex>, l/<hex[:12]>), so nothing
// else may reach them.
func checkDigest(d string) error {
	if !sha256Digest.MatchString(d) {
		return fmt.Errorf("invalid digest %q: want sha256:<64 lowercase hex digits>", d)
	}
	return nil
}
