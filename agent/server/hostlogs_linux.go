package server

import (
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// openBeneath opens rel beneath root without following any symbolic link.
// Only a regular file or a directory is opened: rel is looked up with
// O_PATH, which opens nothing, and reopened through /proc/self/fd when it
// is one (as logfiles.OpenRegularAt does). A FIFO would hang the request,
// and opening a device (one a container with podLogsDir mounted and
// CAP_MKNOD planted) acts by itself.
func openBeneath(root, rel string) (*os.File, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	defer unix.Close(dir)
	p, err := unix.Openat2(dir, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s beneath %s: %w", rel, root, err)
	}
	defer unix.Close(p)
	var st unix.Stat_t
	if err := unix.Fstat(p, &st); err != nil {
		return nil, fmt.Errorf("open %s beneath %s: %w", rel, root, err)
	}
	if t := st.Mode & unix.S_IFMT; t != unix.S_IFREG && t != unix.S_IFDIR {
		return nil, fmt.Errorf("open %s beneath %s: %w", rel, root, errNotServed)
	}
	fd, err := unix.Open("/proc/self/fd/"+strconv.Itoa(p), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s beneath %s: %w", rel, root, err)
	}
	return os.NewFile(uintptr(fd), rel), nil
}
