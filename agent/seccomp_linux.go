package agent

import (
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// readBeneath reads file name inside dir, refusing to leave dir through
// '..', an absolute symlink or one that points out of it (openat2
// RESOLVE_BENEATH), and anything but a regular file; at most max bytes.
func readBeneath(dir, name string, max int64) ([]byte, error) {
	d, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer unix.Close(d)
	fd, err := unix.Openat2(d, name, &unix.OpenHow{
		Flags:   unix.O_RDONLY | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		if err == unix.EXDEV {
			return nil, fmt.Errorf("open %s in %s: it leads out of the directory", name, dir)
		}
		return nil, fmt.Errorf("open %s in %s: %w", name, dir, err)
	}
	f := os.NewFile(uintptr(fd), dir+"/"+name)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s in %s is not a regular file", name, dir)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s in %s: %w", name, dir, err)
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s in %s is larger than %d bytes", name, dir, max)
	}
	return data, nil
}
