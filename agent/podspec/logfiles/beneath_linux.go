package logfiles

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"unsafe"
)

// A container that mounts the pod log directory (podLogsDir) writable can
// replace its own pod's or container's directory with a symlink to any host
// directory. Everything under podLogsDir is therefore opened beneath a
// descriptor of podLogsDir itself, with no symlink followed in any component
// (openat2 RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS, as runc's rootfs_linux.go
// opens mount targets), and a directory so opened is worked in with *at
// calls only. podLogsDir itself is the operator's and trusted.
//
// Paths of the layout are <podLogsDir>/<pod>/<container>/<file>: a container
// directory's root is two levels above it, a file's three.

// ContainerDirDepth and FileDepth are how many components of a container
// directory's and of a log file's path lie beneath podLogsDir.
const (
	ContainerDirDepth = 2
	FileDepth         = 3
)

// SplitBeneath splits path into the directory depth components above it and
// the components beneath that.
func SplitBeneath(path string, depth int) (root string, names []string) {
	path = filepath.Clean(path)
	for range depth {
		dir, name := filepath.Split(path)
		if name == "" { // at "/": no more components
			break
		}
		names = append([]string{name}, names...)
		path = filepath.Clean(dir)
	}
	return path, names
}

// openat2 flags (linux/openat2.h), which package syscall does not have.
const (
	sysOpenat2        = 437 // the same number on every architecture Go runs on
	resolveNoSymlinks = 0x04
	resolveBeneath    = 0x08
)

type openHow struct {
	flags, mode, resolve uint64
}

// openBeneath opens names, one component each, beneath the directory fd,
// following no symlink on the way, with flags for the last one. Where
// openat2 is missing (Linux before 5.6, or a seccomp filter) it walks the
// components with openat O_NOFOLLOW instead, which holds the same.
func openBeneath(fd int, names []string, flags int) (int, error) {
	for _, n := range names {
		if n == "" || n == "." || n == ".." || strings.ContainsRune(n, '/') {
			return -1, fmt.Errorf("%q is not a name beneath the pod log directory: %w", n, syscall.EINVAL)
		}
	}
	flags |= syscall.O_CLOEXEC | syscall.O_NOFOLLOW
	how := openHow{flags: uint64(flags), resolve: resolveBeneath | resolveNoSymlinks}
	rel, err := syscall.BytePtrFromString(strings.Join(names, "/"))
	if err != nil {
		return -1, err
	}
	for {
		r, _, errno := syscall.Syscall6(sysOpenat2, uintptr(fd), uintptr(unsafe.Pointer(rel)),
			uintptr(unsafe.Pointer(&how)), unsafe.Sizeof(how), 0, 0)
		switch errno {
		case 0:
			return int(r), nil
		case syscall.EINTR, syscall.EAGAIN:
			continue
		case syscall.ENOSYS, syscall.EPERM:
			return walkBeneath(fd, names, flags)
		}
		return -1, errno
	}
}

// walkBeneath is openBeneath without openat2.
func walkBeneath(fd int, names []string, flags int) (int, error) {
	cur := fd
	for i, n := range names {
		f := syscall.O_RDONLY | syscall.O_DIRECTORY | syscall.O_CLOEXEC | syscall.O_NOFOLLOW
		if i == len(names)-1 {
			f = flags
		}
		next, err := syscall.Openat(cur, n, f, 0)
		if cur != fd {
			syscall.Close(cur)
		}
		if err != nil {
			return -1, err
		}
		cur = next
	}
	return cur, nil
}

func openRoot(root string) (int, error) {
	fd, err := syscall.Open(root, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: root, Err: err}
	}
	return fd, nil
}

// Open opens path, depth components beneath its pod log root (FileDepth for
// a log file), with flags, without following a symlink anywhere beneath the
// root. A symlink on the way fails with ELOOP (or EXDEV where it points
// out), a missing component with ENOENT.
func Open(path string, depth int, flags int) (*os.File, error) {
	root, names := SplitBeneath(path, depth)
	rfd, err := openRoot(root)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(rfd)
	fd, err := openBeneath(rfd, names, flags)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: explain(err)}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// OpenLog opens a log file, <podLogsDir>/<pod>/<container>/<file>, to
// read: a regular file only, and nothing else is opened (a FIFO planted in
// its place would block, a device node act on its open).
func OpenLog(path string) (*os.File, error) {
	return openRegularBeneath(path, FileDepth, syscall.O_RDONLY)
}

// OpenContainerDir opens a container's log directory,
// <podLogsDir>/<pod>/<container>, to list it or work in it with *at calls.
func OpenContainerDir(dir string) (*os.File, error) {
	return Open(dir, ContainerDirDepth, syscall.O_RDONLY|syscall.O_DIRECTORY)
}

// MakeContainerDir is OpenContainerDir that first creates what is missing:
// podLogsDir by path, the pod's and the container's directories each with
// mkdirat beneath the one opened before it and then opened itself, never
// by path.
func MakeContainerDir(dir string, mode uint32) (*os.File, error) {
	root, names := SplitBeneath(dir, ContainerDirDepth)
	// podLogsDir itself is the operator's: made by path, as it always was.
	if err := os.MkdirAll(root, os.FileMode(mode)); err != nil {
		return nil, err
	}
	cur, err := openRoot(root)
	if err != nil {
		return nil, err
	}
	for _, n := range names {
		next, err := openBeneath(cur, []string{n}, syscall.O_RDONLY|syscall.O_DIRECTORY)
		if errors.Is(err, syscall.ENOENT) {
			if err = syscall.Mkdirat(cur, n, mode); err == nil || errors.Is(err, syscall.EEXIST) {
				next, err = openBeneath(cur, []string{n}, syscall.O_RDONLY|syscall.O_DIRECTORY)
			}
		}
		syscall.Close(cur)
		if err != nil {
			return nil, &os.PathError{Op: "create log directory", Path: dir, Err: explain(err)}
		}
		cur = next
	}
	return os.NewFile(uintptr(cur), dir), nil
}

// ReadContainerDir returns the names in a container's log directory, opened
// as OpenContainerDir does.
func ReadContainerDir(dir string) ([]string, error) {
	d, err := OpenContainerDir(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	return readDirNamesFd(int(d.Fd()))
}

// RotatedLogsAt is RotatedLogs of the log file named base in the directory
// open as dirfd (which it does not move): the paths it returns are names in
// that directory, for *at calls.
func RotatedLogsAt(dirfd int, base string) (inUse []RotatedLog, unused []string, err error) {
	// A description of its own: a listing reads from the start.
	fd, err := syscall.Openat(dirfd, ".", syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("list rotated logs of %s: %w", base, err)
	}
	defer syscall.Close(fd)
	all, err := readDirNamesFd(fd)
	if err != nil {
		return nil, nil, fmt.Errorf("list rotated logs of %s: %w", base, err)
	}
	inUse, unused = rotatedLogs(all, "", base)
	return inUse, unused, nil
}

// errNotBeneath says why a path beneath the pod log directory was refused.
type errNotBeneath struct{ err error }

func (e errNotBeneath) Error() string {
	return "a component is a symlink or not a directory, and none is followed beneath the pod log directory: " + e.err.Error()
}

func (e errNotBeneath) Unwrap() error { return e.err }

// explain names what ELOOP, ENOTDIR and EXDEV mean here: a symlink (or a
// file) where a directory of the layout belongs.
func explain(err error) error {
	if errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EXDEV) {
		return errNotBeneath{err}
	}
	return err
}
