//go:build linux && (mips || mipsle || mips64 || mips64le)

package podspec

import "syscall"

// addStkflt does nothing: MIPS has no SIGSTKFLT.
func addStkflt(map[string]syscall.Signal) {}
