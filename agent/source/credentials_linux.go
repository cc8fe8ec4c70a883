package source

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
	utilio "k8s.io/utils/io"
)

// readCredential opens name beneath dir without following a symlink: one
// component looked up with O_NOFOLLOW from a descriptor of dir is what
// openat2's RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS come to for a single name.
// It is looked up with O_PATH, which opens nothing, and reopened through
// /proc/self/fd only when it is a regular file: a FIFO would block the
// source, a device act on its open.
func readCredential(dir, name string, limit int64) ([]byte, error) {
	d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("credentials directory: %w", err)
	}
	defer unix.Close(d)
	p, err := unix.Openat(d, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", dir, name, err)
	}
	defer unix.Close(p)
	var st unix.Stat_t
	if err := unix.Fstat(p, &st); err != nil {
		return nil, fmt.Errorf("%s/%s: %w", dir, name, err)
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return nil, fmt.Errorf("%s/%s: a symlink, and none is followed in the credentials directory", dir, name)
	case st.Mode&unix.S_IFMT != unix.S_IFREG:
		return nil, fmt.Errorf("%s/%s: not a regular file", dir, name)
	case st.Size > limit:
		return nil, fmt.Errorf("%s/%s: larger than the %d bytes the Secret has left of %d", dir, name, limit, maxSecretSize)
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(p), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", dir, name, err)
	}
	f := os.NewFile(uintptr(fd), name)
	defer f.Close()
	data, err := utilio.ReadAtMost(f, limit+1)
	if errors.Is(err, utilio.ErrLimitReached) {
		return nil, fmt.Errorf("%s/%s: larger than the %d bytes the Secret has left of %d", dir, name, limit, maxSecretSize)
	}
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", dir, name, err)
	}
	return data, nil
}
