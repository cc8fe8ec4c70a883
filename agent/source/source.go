// Package source delivers static pods from a file or directory and from a URL.
// Each source sends its whole pod set every time something may have changed.
package source

import "github.com/staticpodd/staticpodd/agent/manifest"

// Update is the complete set of pods one source has now.
type Update struct {
	Source   string // manifest.SourceFile or manifest.SourceHTTP
	Pods     []manifest.Pod
	Problems []manifest.Problem
}
