package manifest

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AnnotationFollowTags asks staticpodd to follow the tags of the pod's
// images, as podman's auto-update (io.containers.autoupdate=registry) does:
// every interval the registry is asked which digest each tag names, and a
// new digest is pulled and run as a new generation of the pod, which
// staticpodd.io/rollback-after gates like an edit. Images named by digest
// follow nothing.
const AnnotationFollowTags = "staticpodd.io/follow-tags"

// Bounds of follow-tags: more often asks a registry more than any tag moves;
// less often than a week is no longer following.
const (
	MinFollowTags = 10 * time.Second
	MaxFollowTags = 7 * 24 * time.Hour
)

// FollowTags is the pod's follow-tags interval, 0 when it has none or it is
// invalid (validation refuses the manifest then).
func FollowTags(pod *v1.Pod) time.Duration {
	d, _ := followTags(pod)
	return d
}

func followTags(pod *v1.Pod) (time.Duration, error) {
	s, ok := pod.Annotations[AnnotationFollowTags]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("must be a duration such as 1h or 10m: how often the registry is asked for each tag's digest")
	case d < MinFollowTags || d > MaxFollowTags:
		return 0, fmt.Errorf("must be between %s and %s", MinFollowTags, MaxFollowTags)
	}
	return d, nil
}

// FollowSalt is the salt of Regenerate for a pod that runs digests, by
// container name: a new digest under a followed tag is a new generation.
func FollowSalt(digests map[string]string, names []string) string {
	var b strings.Builder
	for _, n := range names {
		if d := digests[n]; d != "" {
			fmt.Fprintf(&b, "follow:%s=%s\n", n, d)
		}
	}
	return b.String()
}

func (v *validator) followTags(pod *v1.Pod, p *field.Path) {
	if _, err := followTags(pod); err != nil {
		value := pod.Annotations[AnnotationFollowTags]
		if len(value) > 64 {
			value = strings.ToValidUTF8(value[:64], "") + "..."
		}
		v.add(field.Invalid(p.Child("annotations").Key(AnnotationFollowTags), value, err.Error()))
	}
}
