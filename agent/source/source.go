// Package source delivers static pods from a file or directory and from a URL.
// Each source sends its whole pod set every time something may have changed;
// Mux runs the daemon's sources on one channel and replaces them on a reload.
package source

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
)

// Update is the complete set of pods one source has now.
type Update struct {
	Source   string // manifest.SourceFile or manifest.SourceHTTP
	Pods     []manifest.Pod
	Problems []manifest.Problem
	// Objects are the ConfigMaps and Secrets the source has now, beside
	// its pods.
	Objects []*objects.Object

	fingerprint string // the file source's, of what it says
}

// Manifest is the content a pod was made from: what a Store keeps with a
// started pod's state, so that a source can run that pod again when its
// manifest is unusable after a daemon restart.
type Manifest struct {
	UID    types.UID
	Source string // manifest.SourceFile or manifest.SourceHTTP
	Origin string // the file path or the URL
	Data   []byte
	Seen   time.Time // when the pod was first seen; from Stored only
}

// Store keeps the manifests of started pods. A source offers the manifests of
// its whole pod set each time it sends one; the Store writes a pod's with the
// pod's state once the pod has started, and removes it with that state.
type Store interface {
	Offer(source string, set []Manifest)
	// Stored returns the manifests kept for source's pods, read from disk.
	Stored(source string) []Manifest
}

// digest stands for what a pod says, beyond its UID: a manifest that keeps
// its own metadata.uid while its labels, annotations or spec change is an
// update of the pod (the kubelet's checkAndUpdatePod), which a set of UIDs
// alone would not show.
func digest(p manifest.Pod) string {
	if p.Pod == nil {
		return ""
	}
	// Without config.seen: the source stamps it, and it may be put right
	// after a daemon restart (the first-seen time kept from before).
	annotations := make(map[string]string, len(p.Annotations))
	for k, v := range p.Annotations {
		if k != manifest.AnnotationSeen {
			annotations[k] = v
		}
	}
	data, err := json.Marshal(struct {
		Labels, Annotations map[string]string
		Spec                any
	}{p.Labels, annotations, p.Spec})
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

// objectDigest stands for what an object says: its metadata and its data,
// values included (a digest, not the values: it is kept in memory to tell
// an edit, and never shown).
func objectDigest(o *objects.Object) string {
	var v any = o.ConfigMap
	if o.Secret != nil {
		v = o.Secret
	}
	data, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
