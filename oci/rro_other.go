//go:build !linux

package oci

// SupportsRecursiveReadOnly: only Linux has recursive read-only mounts.
func SupportsRecursiveReadOnly() bool { return false }
