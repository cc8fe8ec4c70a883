//go:build linux && cgo

package monitor

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"golang.org/x/sys/unix"
)

// ExitArg is argv[1] of the monitor's last role: the C monitor (package
// monitor) execs it once the container's init has exited, as
//
//	staticpodd-monitor __staticpodd_monitor_exit <libcontainer-root> <state-dir> <id> <log>
//	  <log-dir-fd> <stdout-fd> <stderr-fd> <pod-oom-before> <pod-oom-ok>
//	  <wait-status> <finished-unix-ns> <maxSize> <maxFiles>
//
// in the same process (same pid and start time, so adoption sees one
// monitor throughout). It kills what is left of the container, copies what
// the pipes still hold into the log in the directory open on <log-dir-fd>
// (the one the monitor's start opened) with the C monitor's writer
// (drainLog), records the exit and destroys the container.
const ExitArg = "__staticpodd_monitor_exit"

// GzipArg is argv[1] of the C monitor's compression helper:
//
//	staticpodd-monitor __staticpodd_monitor_gzip <dir-fd> <src> <tmp> <maxSize>
//
// writes <src> gzipped to <tmp>, both names in the log directory open as
// <dir-fd>, and syncs it, unless <src> is larger than a rotated file of a
// log rotating at <maxSize> can be (compressLimit); the C monitor renames it.
const GzipArg = "__staticpodd_monitor_gzip"

func runExit(args []string) int {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if len(args) != 13 {
		log.Error("monitor: want <libcontainer-root> <state-dir> <id> <log> <log-dir-fd> <stdout-fd> <stderr-fd> <pod-oom-before> <pod-oom-ok> <wait-status> <finished-unix-ns> <maxSize> <maxFiles>", "args", args)
		return 2
	}
	m := &monitorProc{root: args[0], dir: args[1], id: args[2]}
	log = log.With("container", m.id)
	bad := func(arg string, err error) int {
		log.Error("monitor: bad argument", "arg", arg, "err", err)
		return 2
	}
	dirFd, err := strconv.ParseInt(args[4], 10, 32)
	if err != nil || dirFd < 0 {
		return bad(args[4], err)
	}
	unix.CloseOnExec(int(dirFd))
	logDir := os.NewFile(uintptr(dirFd), filepath.Dir(args[3]))
	args = append(args[:4:4], args[5:]...)
	var fds [2]int
	for i, a := range args[4:6] {
		n, err := strconv.ParseInt(a, 10, 32)
		if err != nil || n < 0 {
			return bad(a, err)
		}
		fds[i] = int(n)
	}
	podOOMBefore, err := strconv.ParseUint(args[6], 10, 64)
	if err != nil {
		return bad(args[6], err)
	}
	podOOMOK, _ := strconv.ParseBool(args[7])
	status, err := strconv.ParseUint(args[8], 10, 32)
	if err != nil {
		return bad(args[8], err)
	}
	finished, err := strconv.ParseInt(args[9], 10, 64)
	if err != nil {
		return bad(args[9], err)
	}
	maxSize, err := strconv.ParseInt(args[10], 10, 64)
	if err != nil {
		return bad(args[10], err)
	}
	maxFiles, err := strconv.ParseInt(args[11], 10, 32)
	if err != nil {
		return bad(args[11], err)
	}
	out, errs := os.NewFile(uintptr(fds[0]), "stdout"), os.NewFile(uintptr(fds[1]), "stderr")
	ws := syscall.WaitStatus(status)
	exit := ExitRecord{FinishedAt: time.Unix(0, finished)}
	if ws.Signaled() {
		exit.Signal = int(ws.Signal())
		exit.ExitCode = 128 + exit.Signal
	} else {
		exit.ExitCode = ws.ExitStatus()
	}
	rot := LogRotation{MaxSize: maxSize, MaxFiles: int(maxFiles)}

	ctr, loadErr := libcontainer.Load(m.root, m.id)
	if loadErr == nil {
		if state, err := ctr.State(); err == nil {
			exit.OOMKilled = oomKilledSince(state.CgroupPaths, podOOMBefore, podOOMOK, exit.Signal)
		}
		// With a shared PID namespace, leftovers may still hold the pipes
		// open: kill them (a private PID namespace died with its init).
		_ = SignalContainer(ctr, unix.SIGKILL)
	}
	// The rest of the output, with the C monitor's writer (its gzip helper
	// is waited for by pid: nothing else reaps meanwhile).
	err = errors.Join(drainLog(m.id, logDir, args[3], rot, out, errs), logDir.Close())
	// Orphans of a container without a PID namespace of its own are still
	// reparented to this subreaper: the ones killed above, reaped now.
	reaped := make(chan struct{})
	close(reaped)
	go reapOrphans(0, reaped)
	// The exit before the clean-up: a monitor that dies in between leaves
	// libcontainer state, which the daemon removes with the container.
	if werr := m.writeExit(exit); werr != nil {
		err = errors.Join(err, werr)
	}
	pauseAt(PauseDestroy)
	if loadErr != nil {
		err = errors.Join(err, fmt.Errorf("load container %s: %w", m.id, loadErr))
	} else if derr := ctr.Destroy(); derr != nil {
		err = errors.Join(err, fmt.Errorf("destroy container %s: %w", m.id, derr))
	}
	if err != nil {
		log.Error("monitor failed", "err", err)
		return 1
	}
	return 0
}

// gzipGone is runGzip's exit code when its source is gone (rotation or
// someone else removed it): nothing to do, and no failure (monitor.c GZIP_GONE).
const gzipGone = 3

// runGzip is the C monitor's compression helper. Its error goes to the
// monitor's log; the C monitor says once that compression fails.
func runGzip(args []string) int {
	if len(args) != 4 {
		fmt.Fprintln(os.Stderr, "monitor gzip: want <dir-fd> <src> <tmp> <maxSize>")
		return 2
	}
	maxSize, err := strconv.ParseInt(args[3], 10, 64)
	if err != nil || maxSize < 0 || maxSize > 1<<62 {
		fmt.Fprintln(os.Stderr, "monitor gzip: bad <maxSize>", args[3])
		return 2
	}
	dirfd, err := strconv.Atoi(args[0])
	if err != nil || dirfd < 0 {
		fmt.Fprintln(os.Stderr, "monitor gzip: bad <dir-fd>", args[0])
		return 2
	}
	err = gzipFile(dirfd, args[1], args[2], compressLimit(maxSize), nil)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return gzipGone
	case err != nil:
		slog.New(slog.NewTextHandler(os.Stderr, nil)).Warn("cannot compress rotated container log", "path", args[1], "err", err)
		return 1
	}
	return 0
}
