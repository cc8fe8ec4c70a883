//go:build !linux || !cgo

package oci

// Reexec reports false: there is nothing to re-execute on this platform.
func Reexec() bool { return false }
