package image

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// WritableBytes is the space taken by the writable layer of snapshot key: what
// its container wrote. The walk never follows a symlink, which the container
// controls; an unknown key is 0.
func (s *Store) WritableBytes(key string) (uint64, error) {
	if err := validKey(key); err != nil {
		return 0, err
	}
	return dirBytes(filepath.Join(s.snapshotsDir(), key, "upper"))
}

// maxWalkDepth bounds how deep dirBytes descends: one open directory per
// level. What lies deeper is not counted.
const maxWalkDepth = 256

// dirBytes sums the allocated size of every file under dir (hard links once
// per directory entry, as du --count-links); a missing dir is 0. The tree
// belongs to a running container, which may swap any directory in it for a
// symlink at any moment: each directory is opened relative to its parent's
// descriptor with O_NOFOLLOW, so the walk never leaves dir.
func dirBytes(dir string) (uint64, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return 0, nil
	}
	if err != nil {
		return 0, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var n uint64
	walkFD(fd, 0, &n) // closes fd
	return n, nil
}

// walkFD adds to n the blocks of directory fd and of everything below it,
// and closes fd. Entries that go meanwhile or cannot be read are not counted.
func walkFD(fd, depth int, n *uint64) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		*n += uint64(st.Blocks) * 512
	}
	names, err := readNames(fd)
	if err != nil {
		unix.Close(fd)
		return
	}
	for _, name := range names {
		if unix.Fstatat(fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil {
			continue
		}
		if st.Mode&unix.S_IFMT != unix.S_IFDIR {
			*n += uint64(st.Blocks) * 512
			continue
		}
		if depth >= maxWalkDepth {
			continue
		}
		child, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // replaced by a symlink or a file, or gone
		}
		walkFD(child, depth+1, n)
	}
	unix.Close(fd)
}

// readNames lists directory fd's entries but "." and "..".
func readNames(fd int) ([]string, error) {
	var names []string
	buf := make([]byte, 8192)
	for {
		n, err := unix.Getdents(fd, buf)
		if err != nil {
			return names, err
		}
		if n <= 0 {
			return names, nil
		}
		_, _, names = unix.ParseDirent(buf[:n], -1, names)
	}
}
