//go:build linux

package oci

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

// createTerminationLog makes the empty file a container writes its
// termination message to, in its state dir dir, and returns its path. The
// file is bound into the container by path, which is safe only because no
// container can write where it lives: dir and its parent must be the
// daemon's, written by nobody else, and not symlinks. The file is writable by
// any user, as the kubelet makes it, so that a container of any user can
// write its message.
func createTerminationLog(dir string) (string, error) {
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := checkPrivateDir(d); err != nil {
			return "", err
		}
	}
	dirfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(dirfd)
	fd, err := unix.Openat(dirfd, terminationLog, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o666)
	if err != nil {
		return "", fmt.Errorf("create %s: %w", filepath.Join(dir, terminationLog), err)
	}
	defer unix.Close(fd)
	if err := unix.Fchmod(fd, 0o666); err != nil { // whatever the umask
		return "", fmt.Errorf("chmod %s: %w", filepath.Join(dir, terminationLog), err)
	}
	return filepath.Join(dir, terminationLog), nil
}

// checkPrivateDir says why d could be changed by someone other than the
// daemon: a symlink, not a directory, owned by another user, or writable by
// group or others.
func checkPrivateDir(d string) error {
	var st unix.Stat_t
	if err := unix.Lstat(d, &st); err != nil {
		return fmt.Errorf("stat %s: %w", d, err)
	}
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("%s is not a directory", d)
	case int(st.Uid) != os.Geteuid():
		return fmt.Errorf("%s is owned by uid %d, not the daemon's", d, st.Uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("%s is writable by group or others (mode %o)", d, st.Mode&0o7777)
	}
	return nil
}

// readTerminationMessage reads at most the last MaxTerminationMessage bytes
// of the termination log in state dir dir. The container may have written
// anything into it, but cannot have made it anything but the regular file
// the daemon made: it is opened without following a symlink, without
// blocking on a FIFO, and refused unless it is a regular file. A file that
// is not there is fs.ErrNotExist.
func readTerminationMessage(dir string) (string, error) {
	f, err := openRegular(filepath.Join(dir, terminationLog))
	if err != nil {
		return "", err
	}
	defer f.Close()
	return readEnd(f, podspec.MaxTerminationMessage)
}

// openRegular opens path read-only, without following a symlink in its last
// component or blocking, and only if it is a regular file.
func openRegular(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			err = fmt.Errorf("%s is a symlink", path)
		}
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return f, nil
}

// readEnd reads the last n bytes of f.
func readEnd(f *os.File, n int64) (string, error) {
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	off := max(fi.Size()-n, 0)
	b, err := io.ReadAll(io.NewSectionReader(f, off, n))
	return string(b), err
}

// logTailOf is the tail of the CRI log at path that stands in for the
// termination message of a container that failed without writing one.
func logTailOf(path string) (string, error) {
	// Beneath podLogsDir through no symlink: a container that mounts it
	// may have swapped its log directory for one to a host directory.
	f, err := logfiles.OpenLog(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	data, err := readEnd(f, maxLogTailRead)
	if err != nil {
		return "", err
	}
	return logTail([]byte(data), fi.Size() <= maxLogTailRead, podspec.MaxTerminationLogLines, podspec.MaxTerminationLogBytes), nil
}
