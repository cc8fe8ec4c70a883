//go:build !linux

package oci

// TrimMemory does nothing off Linux.
func TrimMemory() {}
