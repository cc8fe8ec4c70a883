package monitor

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

// logFileFlags open a live log file: appended to, and never through a
// symlink put where it belongs (a container with the host's log directory
// mounted could otherwise make the monitor append to any file). The C
// monitor opens it the same way.
const logFileFlags = os.O_WRONLY | os.O_CREATE | os.O_APPEND | syscall.O_NOFOLLOW

// errClosing ends a compression cut short (gzipTo's stop).
var errClosing = errors.New("log closing")

// compressSlack is how far past maxSize a rotated file may go and still be
// compressed: rotation goes past it by one entry at most.
const compressSlack = 1 << 20

// compressLimit is the size of the largest rotated file compressed when
// the log rotates at maxSize. A container that can write in its log
// directory may plant a huge sparse file under a rotated name, which costs
// it nothing; compressing it would cost the host hours of CPU, outside the
// pod's cgroup.
func compressLimit(maxSize int64) int64 { return maxSize + compressSlack }

// gzipFile writes src gzipped to tmp, both names in the log directory open
// as dirfd, and syncs it, or removes tmp and fails; neither is opened
// through a symlink (one planted as a rotated file would copy any host file
// into the log directory, for log readers to read), and a src larger than
// limit bytes is refused. stop ends it with errClosing. A missing src is an
// error satisfying errors.Is(err, fs.ErrNotExist). Renaming tmp is the
// caller's: compressOne, or the C monitor after its gzip helper (runGzip).
func gzipFile(dirfd int, src, tmp string, limit int64, stop <-chan struct{}) error {
	// A regular file only: a device node planted as a rotated file is not
	// opened.
	fd, err := logfiles.OpenRegularAt(dirfd, src, unix.O_RDONLY, 0)
	if err != nil {
		return fmt.Errorf("compress %s: %w", src, &os.PathError{Op: "open", Path: src, Err: err})
	}
	in := os.NewFile(uintptr(fd), src)
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return fmt.Errorf("compress %s: %w", src, err)
	}
	if fi.Size() > limit {
		return fmt.Errorf("compress %s: %d bytes, more than a rotated log of this maxSize holds (%d)", src, fi.Size(), limit)
	}
	// Written under a name of its own, made with O_EXCL, and renamed to
	// tmp once whole: whatever is under tmp (a device node or a FIFO a
	// container planted, or a crash's leftover) is replaced, never opened.
	out, err := createOwn(dirfd, tmp)
	if err != nil {
		return fmt.Errorf("compress %s: %w", src, err)
	}
	err = gzipTo(out, in, stop)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirfd, out.Name(), dirfd, tmp)
	}
	if err != nil {
		_ = unix.Unlinkat(dirfd, out.Name(), 0)
		return fmt.Errorf("compress %s: %w", src, err)
	}
	return nil
}

// createOwn creates a new file in the directory dirfd named <tmp>.<random>.tmp
// (a name a crash leaves is tidied as tmp is: RotatedLogs' unused), with
// O_EXCL: one nobody else made.
func createOwn(dirfd int, tmp string) (*os.File, error) {
	var err error
	for range 8 {
		name := fmt.Sprintf("%s.%016x%s", strings.TrimSuffix(tmp, logfiles.TempLogSuffix), rand.Uint64(), logfiles.TempLogSuffix)
		var fd int
		fd, err = unix.Openat(dirfd, name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
		if err == nil {
			return os.NewFile(uintptr(fd), name), nil
		}
		if !errors.Is(err, unix.EEXIST) {
			break
		}
	}
	return nil, &os.PathError{Op: "create", Path: tmp, Err: err}
}

// gzipLevel trades the size of compressed logs for the monitor's CPU; the
// format is the same at every level. See docs/benchmarks.md.
const gzipLevel = gzip.BestSpeed

// gzipTo writes in, gzipped, to out and syncs it. It stops with errClosing
// when stop is closed.
func gzipTo(out *os.File, in io.Reader, stop <-chan struct{}) error {
	return gzipLevelTo(out, in, gzipLevel, stop)
}

func gzipLevelTo(out *os.File, in io.Reader, level int, stop <-chan struct{}) error {
	zw, err := gzip.NewWriterLevel(out, level)
	if err != nil {
		return err
	}
	buf := make([]byte, 128<<10)
	for {
		select {
		case <-stop:
			return errClosing
		default:
		}
		n, rerr := in.Read(buf)
		if n > 0 {
			if _, err := zw.Write(buf[:n]); err != nil {
				return err
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return out.Sync()
}
