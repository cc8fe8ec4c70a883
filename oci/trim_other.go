//go:build !linux

package oci

// TrimMemory does nothing off Linux.
func TrimMemory() {}

// SmallPagesForExecutable does nothing off Linux.
func SmallPagesForExecutable() {}
