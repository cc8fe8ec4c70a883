//go:build !linux

package podspec

import "syscall"

// Containers run on Linux only: elsewhere no signal is known by name.
var (
	signals     = map[string]syscall.Signal{}
	signalNames = map[syscall.Signal]string{}
)
