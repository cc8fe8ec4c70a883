package manifest

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AnnotationRollbackAfter is how long a new generation of the pod has to be
// Ready before it is stopped and the last generation that was Ready runs
// again (agent/rollout). Absent: never, as with the kubelet.
const AnnotationRollbackAfter = "staticpodd.io/rollback-after"

// Bounds of rollback-after: shorter would roll back a pod still pulling or
// starting; longer is a pod left broken for more than a day.
const (
	MinRollbackAfter = 5 * time.Second
	MaxRollbackAfter = 24 * time.Hour
)

// RollbackAfter is the pod's rollback-after, 0 when it has none or it is
// invalid (validation refuses the manifest then).
func RollbackAfter(pod *v1.Pod) time.Duration {
	d, _ := rollbackAfter(pod)
	return d
}

func rollbackAfter(pod *v1.Pod) (time.Duration, error) {
	s, ok := pod.Annotations[AnnotationRollbackAfter]
	if !ok {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	switch {
	case err != nil:
		return 0, fmt.Errorf("must be a duration such as 90s or 5m")
	case d < MinRollbackAfter || d > MaxRollbackAfter:
		return 0, fmt.Errorf("must be between %s and %s", MinRollbackAfter, MaxRollbackAfter)
	}
	return d, nil
}

// rollout checks the staticpodd.io/ rollout annotations; the value shown is
// cut, since a manifest's author decides its length.
func (v *validator) rollout(pod *v1.Pod, p *field.Path) {
	if _, err := rollbackAfter(pod); err != nil {
		value := pod.Annotations[AnnotationRollbackAfter]
		if len(value) > 64 {
			value = strings.ToValidUTF8(value[:64], "") + "..."
		}
		v.add(field.Invalid(p.Child("annotations").Key(AnnotationRollbackAfter), value, err.Error()))
	}
}
