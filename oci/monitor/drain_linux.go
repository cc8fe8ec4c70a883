//go:build linux && cgo

package monitor

// #include <stdlib.h>
// int staticpodd_drain_log(const char *id, const char *path, int dirfd, long long msize, int mfiles,
//                          int out_fd, int err_fd, const char *prog_arg0, const char *gz_arg);
import "C"

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

// drainLog copies out and errs into the container's log until both pipes
// are at their end, rotating and compressing it as the C monitor does: it is
// the C monitor's writer (monitor.c, staticpodd_drain_log) run where no C
// monitor runs, after a start that failed and in the exit recorder, so that
// one writer writes a container's log for its whole life. path names the log;
// its file is worked on by name in logDir, the directory the monitor's start
// opened beneath the pod log directory. At most once per process: the C
// writer's state is the process's. No child may be reaped by anyone else
// meanwhile (it waits for its gzip helper by pid).
func drainLog(id string, logDir *os.File, path string, rot LogRotation, out, errs *os.File) error {
	cs := func(s string) *C.char { return C.CString(s) }
	cid, cpath, cname, cgz := cs(id), cs(path), cs(Name), cs(GzipArg)
	defer func() {
		for _, p := range []*C.char{cid, cpath, cname, cgz} {
			C.free(unsafe.Pointer(p))
		}
	}()
	closeOnExecAbove2()
	errno := C.staticpodd_drain_log(cid, cpath, C.int(logDir.Fd()), C.longlong(rot.MaxSize), C.int(rot.MaxFiles),
		C.int(out.Fd()), C.int(errs.Fd()), cname, cgz)
	runtime.KeepAlive(logDir)
	runtime.KeepAlive(out)
	runtime.KeepAlive(errs)
	switch {
	case errno == 0:
		return nil
	case errno < 0:
		return fmt.Errorf("open log %s: %w", path, &os.PathError{Op: "open", Path: path, Err: syscall.Errno(-errno)})
	default:
		return fmt.Errorf("copy the output of container %s to %s: %w", id, path, syscall.Errno(errno))
	}
}

// closeOnExecAbove2 keeps every descriptor the monitor holds from the gzip
// helpers the drain starts: the container's pipes and the report pipe to the
// daemon were passed on without close-on-exec. The drain is the monitor's
// last work, so nothing it execs later needs them; the log directory's
// descriptor reaches the helper anyway (its child clears close-on-exec on it
// alone).
func closeOnExecAbove2() {
	if unix.CloseRange(3, math.MaxUint32, unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	// Before Linux 5.11.
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return
	}
	for _, e := range ents {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			unix.CloseOnExec(fd)
		}
	}
}

// makeLog makes the container's log directory beneath the pod log directory
// and its live file, empty, before the container exists, and opens the
// directory, which the C monitor, the exit recorder and drainLog work in.
func makeLog(path string) (*os.File, error) {
	dir, err := logfiles.MakeContainerDir(filepath.Dir(path), 0o755)
	if err != nil {
		return nil, fmt.Errorf("create log dir for %s: %w", path, err)
	}
	fd, err := logfiles.OpenRegularAt(int(dir.Fd()), filepath.Base(path), logFileFlags, 0o640)
	if err != nil {
		_ = dir.Close()
		return nil, fmt.Errorf("open log %s: %w", path, &os.PathError{Op: "open", Path: path, Err: err})
	}
	_ = syscall.Close(fd)
	return dir, nil
}

// rotation is when the container's log rotates, as the monitor's start
// knows it: the container's limits, or those a reload set since.
type rotation struct {
	mu  sync.Mutex
	rot LogRotation
}

func (r *rotation) get() LogRotation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rot
}

// set takes rot as the C monitor's set_rotation does: a maxSize of 0 or
// less turns rotation off, and maxFiles is at least 2.
func (r *rotation) set(rot LogRotation) {
	if rot.MaxSize <= 0 {
		rot = LogRotation{MaxSize: rot.MaxSize}
	} else {
		rot.MaxFiles = max(rot.MaxFiles, 2)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rot = rot
}
