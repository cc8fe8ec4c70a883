//go:build !linux

package monitor

// TrimMemory does nothing off Linux.
func TrimMemory() {}

// SmallPagesForExecutable does nothing off Linux.
func SmallPagesForExecutable() {}

// DropExecutablePages does nothing off Linux.
func DropExecutablePages() {}

// DropInitPages does nothing off Linux.
func DropInitPages() {}
