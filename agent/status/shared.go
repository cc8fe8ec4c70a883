package status

import (
	"encoding/json"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Shared is a pod the Manager shows, handed to a subscriber without a copy:
// the Manager's own. A pod the Manager holds never changes (Update replaces
// it, it does not change it), so a Shared never changes either, whoever
// holds it and for as long: it may be kept, and when it is Same as one kept
// it is the same pod with the same status, which need not be read again.
// Its methods only read it; Copy gives a pod of one's own to change. The
// zero Shared is no pod.
//
// What one keeps keeps that pod's memory too (its spec and status, a few
// KiB): keep one a pod, and drop it with what it stood for.
type Shared struct{ p *v1.Pod }

// Share makes p a Shared. Nothing may change p from then on: the Manager
// shares only the pods it holds, which nothing changes; a test shares the
// pods it makes.
func Share(p *v1.Pod) Shared { return Shared{p} }

// IsZero reports whether s is no pod.
func (s Shared) IsZero() bool { return s.p == nil }

// Same reports whether s and o are the same pod (or both none): nothing of
// it can differ. Two pods alike but published apart are not Same.
func (s Shared) Same(o Shared) bool { return s.p == o.p }

// UID is the pod's UID; "" for none.
func (s Shared) UID() types.UID {
	if s.p == nil {
		return ""
	}
	return s.p.UID
}

// Annotation is the value of the pod's annotation key; "" for none.
func (s Shared) Annotation(key string) string {
	if s.p == nil {
		return ""
	}
	return s.p.Annotations[key]
}

// Phase is the pod's status.phase; "" for none.
func (s Shared) Phase() v1.PodPhase {
	if s.p == nil {
		return ""
	}
	return s.p.Status.Phase
}

// StatusJSON is the pod's status as JSON.
func (s Shared) StatusJSON() ([]byte, error) {
	if s.p == nil {
		return json.Marshal(v1.PodStatus{})
	}
	return json.Marshal(&s.p.Status)
}

// Copy is a deep copy of the pod, the caller's own; nil for none.
func (s Shared) Copy() *v1.Pod { return s.p.DeepCopy() }
