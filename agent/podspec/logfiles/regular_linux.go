package logfiles

import (
	"errors"
	"os"
	"strconv"
	"syscall"
)

// oPath is O_PATH, the same on every architecture Go runs on, which package
// syscall has for some only.
const oPath = 0x200000

// ErrNotRegular refuses a log file that is a device node, a FIFO or a socket.
var ErrNotRegular = errors.New("not a regular file")

// A container that can write in the pod log directory and has CAP_MKNOD
// (runc lets every container make any device node; the devices cgroup only
// stops the container's own open) can plant the host's disk, /dev/port or a
// watchdog under a log file's name. Opening a device can act by itself, and
// writing it reaches the host: a log file is looked up with O_PATH, which
// opens nothing, and opened only when that is a regular file, through
// /proc/self/fd, as runc reopens its O_PATH descriptors (reopenAfterMount).

// OpenRegularAt opens name in the directory dirfd with flags when it is a
// regular file, following no symlink (ELOOP) and opening nothing else
// (ErrNotRegular). With O_CREAT a missing name is created with O_EXCL, which
// makes a regular file or fails.
func OpenRegularAt(dirfd int, name string, flags int, mode uint32) (int, error) {
	for range 3 {
		p, err := syscall.Openat(dirfd, name, oPath|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if errors.Is(err, syscall.ENOENT) && flags&syscall.O_CREAT != 0 {
			fd, err := syscall.Openat(dirfd, name, flags|syscall.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, mode)
			if errors.Is(err, syscall.EEXIST) {
				continue // made meanwhile: looked at again
			}
			return fd, err
		}
		if err != nil {
			return -1, err
		}
		fd, err := ReopenRegular(p, flags)
		syscall.Close(p)
		return fd, err
	}
	return -1, syscall.EEXIST
}

// ReopenRegular opens the file that the O_PATH descriptor p refers to with
// flags, when it is a regular file: what a container wrote is looked up with
// O_PATH and opened only through this.
func ReopenRegular(p int, flags int) (int, error) {
	var st syscall.Stat_t
	if err := syscall.Fstat(p, &st); err != nil {
		return -1, err
	}
	switch st.Mode & syscall.S_IFMT {
	case syscall.S_IFREG:
	case syscall.S_IFLNK:
		return -1, syscall.ELOOP
	default:
		return -1, ErrNotRegular
	}
	return syscall.Open("/proc/self/fd/"+strconv.Itoa(p), flags&^(syscall.O_CREAT|syscall.O_EXCL|syscall.O_NOFOLLOW)|syscall.O_CLOEXEC, 0)
}

// openRegularBeneath is Open of a regular file only, as OpenRegularAt.
func openRegularBeneath(path string, depth int, flags int) (*os.File, error) {
	p, err := Open(path, depth, oPath)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	fd, err := ReopenRegular(int(p.Fd()), flags)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}
