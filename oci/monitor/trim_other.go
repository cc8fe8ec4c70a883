//go:build !linux

package monitor

// TrimMemory does nothing off Linux.
func TrimMemory() {}

// SmallPagesForExecutable does nothing off Linux.
func SmallPagesForExecutable() {}

// DropInitPages does nothing off Linux.
func DropInitPages() {}
