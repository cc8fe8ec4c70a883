//go:build linux && cgo

package monitor

import (
	"errors"
	"unsafe"

	"golang.org/x/sys/unix"
)

// siginfoChld is the start of a siginfo_t for SIGCHLD (x86-64 and arm64
// layout), which unix.Siginfo keeps opaque.
type siginfoChld struct {
	Signo, Errno, Code, _ int32
	Pid                   int32
	Uid                   uint32
	Status                int32
	_                     [100]byte
}

// The kernel writes a whole siginfo_t.
var _ [unsafe.Sizeof(unix.Siginfo{}) - unsafe.Sizeof(siginfoChld{})]struct{}
var _ [unsafe.Sizeof(siginfoChld{}) - unsafe.Sizeof(unix.Siginfo{})]struct{}

// reapOrphans reaps every exited child of the monitor but the container's
// init, as containerd's shim does: the monitor is a child subreaper, so the
// orphans of a container in the host's PID namespace become its children,
// and would stay zombies. Init is left to proc.Wait, which takes its status;
// once initReaped is closed, anything left is reaped too. It returns when the
// monitor has no child left.
func reapOrphans(init int, initReaped <-chan struct{}) {
	for {
		pid, err := peekExited()
		switch {
		case errors.Is(err, unix.EINTR):
		case err != nil:
			return // ECHILD: no child left
		case pid == init:
			<-initReaped
		default:
			_, _ = unix.Wait4(pid, nil, unix.WNOHANG, nil)
		}
	}
}

// peekExited blocks until a child has exited and returns its pid, leaving it
// unreaped.
func peekExited() (int, error) {
	var info siginfoChld
	err := unix.Waitid(unix.P_ALL, 0, (*unix.Siginfo)(unsafe.Pointer(&info)), unix.WEXITED|unix.WNOWAIT, nil)
	if err != nil {
		return 0, err
	}
	return int(info.Pid), nil
}
