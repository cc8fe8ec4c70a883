package logfiles

import (
	"fmt"
	"runtime"
	"syscall"
	"unsafe"
)

// readDirNames returns the names in dir as they were at one moment. A
// directory read in several getdents(2) calls while files in it are renamed
// can miss a file in both its old and its new name (seen on ext4). One call
// is served whole under the directory's lock, which creating, removing and
// renaming its entries takes exclusively: the buffer grows until one call
// returns the whole directory.
//
// A call also ends early, after any entry, when a signal is pending for the
// thread (the kernel's filldir64), and returns what it has as if that were
// all: the Go runtime's own preemption signals cut a listing short that way
// (seen as a rotated log missing from a listing of a directory that did
// not change). So the call is made with the thread's signals blocked, and
// it counts as whole only when a second call finds nothing after it.
func readDirNames(dir string) ([]string, error) {
	d, err := OpenContainerDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := readDirNamesFd(int(d.Fd()))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", dir, err)
	}
	return names, nil
}

// readDirNamesFd is readDirNames of the directory open as fd, which it
// reads from its start and leaves at its end.
func readDirNamesFd(fd int) ([]string, error) {
	// The largest entry: a 256-byte name and its header, aligned.
	const maxEntry = 19 + 256 + 5
	probe := make([]byte, maxEntry)
	for size := 32 << 10; ; {
		buf := make([]byte, size)
		n, more, err := getdentsWhole(fd, buf, probe)
		if err != nil {
			return nil, err
		}
		switch {
		case n > size-maxEntry:
			size *= 2 // the next entry may not have fitted
		case more == 0:
			_, _, names := syscall.ParseDirent(buf[:n], -1, nil)
			return names, nil
		}
		// Cut short by a signal that cannot be blocked (SIGSTOP): again.
	}
}

// getdentsWhole reads dir from its start into buf with one getdents(2)
// call, and into probe with the next, with the calling thread's signals
// blocked: n is what the first call read, more what the second did.
func getdentsWhole(fd int, buf, probe []byte) (n, more int, err error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	all, old := ^uint64(0), uint64(0) // SIGKILL and SIGSTOP stay unblocked
	// Where signals cannot be blocked so (mips numbers these differently
	// and has a larger set), the second call still tells a listing cut
	// short, and it is read again.
	if sigprocmask(sigBlock, &all, &old) == nil {
		defer sigprocmask(sigSetmask, &old, nil)
	}
	if _, err := syscall.Seek(fd, 0, 0); err != nil {
		return 0, 0, err
	}
	if n, err = getdents(fd, buf); err != nil {
		return 0, 0, err
	}
	if more, err = getdents(fd, probe); err != nil {
		return 0, 0, err
	}
	return n, more, nil
}

// rt_sigprocmask's how, on every architecture but mips.
const (
	sigBlock   = 0
	sigSetmask = 2
)

// sigprocmask sets the calling thread's signal mask (rt_sigprocmask(2)),
// which the Go runtime leaves to the thread; the caller has locked it.
func sigprocmask(how int, set, old *uint64) error {
	_, _, errno := syscall.RawSyscall6(syscall.SYS_RT_SIGPROCMASK, uintptr(how),
		uintptr(unsafe.Pointer(set)), uintptr(unsafe.Pointer(old)), unsafe.Sizeof(*set), 0, 0)
	if errno != 0 {
		return errno
	}
	return nil
}

func getdents(fd int, buf []byte) (int, error) {
	for {
		n, err := syscall.Getdents(fd, buf)
		if err != syscall.EINTR {
			return n, err
		}
	}
}
