package podspec

import (
	"fmt"
	"syscall"
)

// readDirNames returns the names in dir as they were at one moment. A
// directory read in several getdents(2) calls while files in it are renamed
// can miss a file in both its old and its new name (seen on ext4). One call
// is served whole under the directory's lock, which creating, removing and
// renaming its entries takes exclusively: the buffer grows until one call
// returns the whole directory.
func readDirNames(dir string) ([]string, error) {
	fd, err := syscall.Open(dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", dir, err)
	}
	defer syscall.Close(fd)
	// The largest entry: a 256-byte name and its header, aligned.
	const maxEntry = 19 + 256 + 5
	for size := 32 << 10; ; size *= 2 {
		if _, err := syscall.Seek(fd, 0, 0); err != nil {
			return nil, fmt.Errorf("read %s: %w", dir, err)
		}
		buf := make([]byte, size)
		n, err := getdents(fd, buf)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", dir, err)
		}
		// The kernel stops at the end, or at an entry that does not fit.
		if n <= size-maxEntry {
			_, _, names := syscall.ParseDirent(buf[:n], -1, nil)
			return names, nil
		}
	}
}

func getdents(fd int, buf []byte) (int, error) {
	for {
		n, err := syscall.Getdents(fd, buf)
		if err != syscall.EINTR {
			return n, err
		}
	}
}
