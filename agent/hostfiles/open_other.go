//go:build !linux

package hostfiles

import (
	"io/fs"
	"os"
	"syscall"
)

// openRegular opens the file at path when it is a regular file; for
// anything else it returns its FileInfo and no file. Without O_PATH, the
// file is opened with O_NONBLOCK, which never waits on a FIFO.
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fi, err
	}
	return f, fi, nil
}
