package hostfiles

import (
	"io/fs"
	"os"
	"syscall"
	"time"

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

// stamp tells a file's contents apart without reading them: its inode,
// size and change times. A write changes the ctime, which no one but the
// kernel sets, and a file renamed over is another inode.
type stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime syscall.Timespec
}

// racy is how recent a change may be for its stamp not to be trusted: a
// file's times may have the clock's tick as their resolution, so a second
// write within the tick of the first, of the same size, would have the same
// stamp (git's "racily clean" entries). A variable for the tests only.
var racy = 2 * time.Second

// stampOf is fi's stamp; zero, when read is not zero, for a file changed
// within racy before read (or after it, the clock set back): such a file
// is read again at the next look.
func stampOf(fi fs.FileInfo, read time.Time) stamp {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return stamp{}
	}
	if !read.IsZero() {
		if age := read.Sub(time.Unix(st.Ctim.Unix())); age < racy {
			return stamp{}
		}
	}
	return stamp{dev: uint64(st.Dev), ino: st.Ino, size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
}
