//go:build !linux || !cgo

package oci

// BuildFeatures: without Linux and cgo there is no container runtime.
func BuildFeatures() Features { return Features{} }
