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
	u, err := walkDir(dir)
	return u.bytes, err
}

// Usage is the space and the inodes the store takes on its filesystem: its
// layers, the containers' writable layers and the imports in progress,
// counted as dirBytes counts. The containers' mounted root filesystems,
// other filesystems, are not entered (as du -x).
func (s *Store) Usage() (bytes, inodes uint64, err error) {
	u, err := walkDir(s.root)
	return u.bytes, u.inodes, err
}

// usage is what a walk counted.
type usage struct {
	bytes, inodes uint64
	dev           uint64 // the filesystem walked; directories on others are skipped
}

// walkDir walks dir as dirBytes describes.
func walkDir(dir string) (usage, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return usage{}, nil
	}
	if err != nil {
		return usage{}, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return usage{}, &os.PathError{Op: "stat", Path: dir, Err: err}
	}
	u := usage{dev: st.Dev}
	walkFD(fd, 0, &u) // closes fd
	return u, nil
}

// walkFD adds to u the blocks and inodes of directory fd and of everything
// below it, and closes fd. Entries that go meanwhile or cannot be read are
// not counted.
func walkFD(fd, depth int, u *usage) {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		u.bytes += uint64(st.Blocks) * 512
		u.inodes++
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
			u.bytes += uint64(st.Blocks) * 512
			u.inodes++
			continue
		}
		if depth >= maxWalkDepth || st.Dev != u.dev {
			continue
		}
		child, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue // replaced by a symlink or a file, or gone
		}
		walkFD(child, depth+1, u)
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
