package spec

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// WithRunAsNonRoot refuses a container that would run as root, as the kubelet's
// verifyRunAsNonRoot (pkg/kubelet/kuberuntime/security_context_others.go) does
// when runAsNonRoot is set; it changes nothing in the spec.
//
// runAsUser, when set, is checked alone. Otherwise the user is the image's, read
// as the kubelet reads it from the CRI image status (containerd's
// getUserFromImage): the part before ':' is a uid when numeric, else a user name,
// and no user at all is root. The kubelet cannot tell a name's uid without
// running the container, so a name is refused even when the image's /etc/passwd
// gives it a non-zero uid.
func WithRunAsNonRoot(runAsUser *int64, imageUser string) SpecOpt {
	return func(*specs.Spec) error {
		if runAsUser != nil {
			if *runAsUser == 0 {
				return fmt.Errorf("container's runAsUser breaks non-root policy")
			}
			return nil
		}
		uid, name := imageUID(imageUser)
		switch {
		case uid == nil:
			return fmt.Errorf("container has runAsNonRoot and image has non-numeric user (%s), cannot verify user is non-root", shorten(name))
		case *uid == 0:
			return fmt.Errorf("container has runAsNonRoot and image will run as root")
		case *uid < 0 || *uid > math.MaxInt32:
			return fmt.Errorf("container has runAsNonRoot and image has an invalid user id (%d). (Must be 1-(%d))", *uid, math.MaxInt32)
		}
		return nil
	}
}

// imageUID splits an image's User into a uid, or a name when not numeric; an
// empty User is uid 0.
func imageUID(imageUser string) (*int64, string) {
	name, _, _ := strings.Cut(imageUser, ":")
	if name == "" {
		return new(int64), ""
	}
	uid, err := strconv.ParseInt(name, 10, 64)
	if err != nil {
		return nil, name
	}
	return &uid, ""
}
