// Package source delivers static pods from a file or directory and from a URL.
// Each source sends its whole pod set every time something may have changed.
package source

import (
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// Update is the complete set of pods one source has now.
type Update struct {
	Source   string // manifest.SourceFile or manifest.SourceHTTP
	Pods     []manifest.Pod
	Problems []manifest.Problem
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
