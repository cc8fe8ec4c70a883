// Package bundle is staticpodd's signed bundle: one OCI artifact (a
// registry's, or an OCI layout, tarred or not) that carries a set of
// manifests, the ConfigMaps and Secret references they need and their
// images with their signatures, signed as a whole; and the bundles a node
// has applied, under <root-dir>/bundles.
//
// On disk:
//
//	bundles/lock              flock(2)ed by every change of state.json
//	bundles/state.json        which bundle runs, which ran before, and whether the running one is still on trial
//	bundles/<hex>/bundle.json a bundle's record (Record)
//	bundles/<hex>/manifests/  its manifests, as the file source reads a directory
package bundle

import "time"

// Record is one applied bundle, by the digest of its manifest.
type Record struct {
	Name    string    `json:"name"`
	Digest  string    `json:"digest"` // sha256:… of the bundle's manifest
	Created time.Time `json:"created,omitzero"`
	Applied time.Time `json:"applied"`
	// Signer is the policy's verdict on the bundle's signature, as the
	// store records an image's ("verified by key cosign.pub", "accepted").
	Signer string `json:"signer"`
	// Images are the images it brought, pinned while it runs.
	Images []Image `json:"images"`
	// Manifests are the file names under manifests/.
	Manifests []string `json:"manifests"`
	// RollbackAfter is how long it has to be Ready before the bundle it
	// replaced comes back (0: never rolled back).
	RollbackAfter time.Duration `json:"rollbackAfter,omitempty"`
}

// Image is one image of a bundle.
type Image struct {
	Ref    string `json:"ref"`    // as the manifests name it
	Digest string `json:"digest"` // the manifest digest verified and run
	ID     string `json:"id"`     // the store's image ID (config digest)
}

// State is bundles/state.json.
type State struct {
	// Current is the hex digest of the bundle the node runs ("" for none).
	Current string `json:"current,omitempty"`
	// Previous is the bundle Current replaced, kept (and its images pinned)
	// until Current is Ready, for a rollback.
	Previous string `json:"previous,omitempty"`
	// Trial says Current is not yet Ready; since when.
	Trial time.Time `json:"trial,omitzero"`
	// RolledBack says the last bundle applied was rolled back, and why.
	RolledBack *RolledBack `json:"rolledBack,omitempty"`
}

// RolledBack is a bundle that was not Ready in time.
type RolledBack struct {
	Digest string    `json:"digest"`
	At     time.Time `json:"at"`
	Reason string    `json:"reason"`
}
