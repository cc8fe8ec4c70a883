package server

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// openBeneath opens rel beneath root without following any symbolic link,
// non-blocking so that a FIFO does not hang the request.
func openBeneath(root, rel string) (*os.File, error) {
	dir, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", root, err)
	}
	defer unix.Close(dir)
	fd, err := unix.Openat2(dir, rel, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_NONBLOCK | unix.O_NOCTTY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS,
	})
	if err != nil {
		return nil, fmt.Errorf("open %s beneath %s: %w", rel, root, err)
	}
	return os.NewFile(uintptr(fd), rel), nil
}
