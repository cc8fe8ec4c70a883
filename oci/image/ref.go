package image

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

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

var sha256Digest = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^sha256:[0-9a-f]{64}$`) })

// checkDigest refuses a digest that is not sha256:<64 lowercase hex digits>: the
// store makes paths of layer digests (layers/<hex>, l/<hex[:12]>), so nothing
// else may reach them.
func checkDigest(d string) error {
	if !sha256Digest().MatchString(d) {
		return fmt.Errorf("invalid digest %q: want sha256:<64 lowercase hex digits>", d)
	}
	return nil
}

// StatusRef is what a container of img started for ref reports as its
// imageID, as containerd's CRI does: the repository digest the image was
// pulled by (repository@sha256:… of the manifest), that of ref's repository
// when there are several, else the image's ID (its config digest), which is
// all an imported image has.
func (img Image) StatusRef(ref string) string {
	if len(img.RepoDigests) == 0 {
		return img.ID
	}
	if n, err := Normalize(ref); err == nil {
		repo := n
		if i := strings.LastIndex(repo, "@"); i >= 0 {
			repo = repo[:i]
		} else if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
			repo = repo[:i]
		}
		for _, d := range img.RepoDigests {
			if strings.HasPrefix(d, repo+"@") {
				return d
			}
		}
	}
	return img.RepoDigests[0]
}
