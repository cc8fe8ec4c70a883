package image

import (
	"errors"
	"io/fs"
	"path/filepath"
	"syscall"
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

// dirBytes sums the allocated size of every file under dir (hard links once
// per directory entry, as du --count-links); a missing dir is 0.
func dirBytes(dir string) (uint64, error) {
	var n uint64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == dir && errors.Is(err, fs.ErrNotExist) {
				return filepath.SkipAll
			}
			return nil // gone meanwhile, or unreadable: not counted
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			n += uint64(st.Blocks) * 512
		}
		return nil
	})
	return n, err
}
