package hostfiles

import (
	"io/fs"
	"os"
	"syscall"

	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

// oPath is O_PATH, which package syscall has for some architectures only.
const oPath = 0x200000

// openRegular opens the file at path, following symlinks, when it is a
// regular file; for anything else it returns its FileInfo and no file. A
// watched file may be in a pod's hostPath, so a container can put a device
// node or a FIFO in its place: it is looked up with O_PATH, which opens
// nothing (opening /dev/watchdog arms the watchdog, opening a FIFO wakes its
// writers), and reopened only if it is a regular file.
func openRegular(path string) (*os.File, fs.FileInfo, error) {
	p, err := syscall.Open(path, oPath|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	pf := os.NewFile(uintptr(p), path)
	defer pf.Close()
	fi, err := pf.Stat()
	if err != nil {
		return nil, nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fi, nil
	}
	fd, err := logfiles.ReopenRegular(p, syscall.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		return nil, nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), fi, nil
}
