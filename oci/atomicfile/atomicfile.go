// Package atomicfile replaces a file's content so that a reader, or the next
// process after a crash, sees the old content or the new one, never a part.
package atomicfile

import (
	"os"
	"path/filepath"
)

// Write replaces path with data: a temp file in the same directory (mode
// 0600), fsync, rename. On error the temp file is removed and path is
// untouched. The error is the file system's, which names the file.
func Write(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}
