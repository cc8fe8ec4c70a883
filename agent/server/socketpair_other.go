//go:build !linux

package server

import "syscall"

// socketpair is a connected pair of unix stream sockets, close-on-exec:
// where SOCK_CLOEXEC is not a socket type flag, set after, under ForkLock,
// as the syscall package does.
func socketpair() ([2]int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
	if err != nil {
		return fds, err
	}
	syscall.CloseOnExec(fds[0])
	syscall.CloseOnExec(fds[1])
	return fds, nil
}
