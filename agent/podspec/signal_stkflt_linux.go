//go:build linux && !(mips || mipsle || mips64 || mips64le)

package podspec

import "syscall"

// addStkflt adds SIGSTKFLT, which MIPS does not have.
func addStkflt(m map[string]syscall.Signal) { m["SIGSTKFLT"] = syscall.SIGSTKFLT }
