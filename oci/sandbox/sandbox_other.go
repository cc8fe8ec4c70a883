//go:build !linux || !cgo

package sandbox

// Sandboxes need Linux and cgo; package oci's Runtime names these, and
// has no use for them here.
type (
	Manager struct{}
	Network struct{}
)
