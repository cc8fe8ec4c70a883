//go:build linux && cgo

package oci

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/system"
	"golang.org/x/sys/unix"

	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// Why monitorLost declined to record an exit.
var (
	errStarting = errors.New("container is starting")
	errRemoving = errors.New("container is being removed")
)

// monitorLost records the exit of a container whose monitor died: the
// container is killed, since nothing would copy its output or see its exit.
// It declines (errStarting, errRemoving) for a container that StartContainer or
// remove is handling: their monitor ends without an exit of its own.
func (r *Runtime) monitorLost(id string) error {
	// Held while the exit is written, so that a remove starting meanwhile
	// finds it written, and deletes it.
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.starting[id]:
		return errStarting
	case r.removing[id]:
		return errRemoving
	}
	if _, err := os.Stat(filepath.Join(r.containerDir(id), containerFile)); err != nil {
		return errRemoving // removed just before we took mu
	}
	msg := "container monitor died; container killed"
	killed := false
	if m := r.monitors[id]; m != nil && m.reason() != "" {
		msg, killed = m.reason(), true // the daemon killed it
	}
	// A container whose process never ran (its monitor died before it told
	// runc's init to exec it: a daemon killed in the middle of its start)
	// is a start that failed, as the kubelet records one, not a kill; unless
	// the daemon killed it, which says why.
	var ms monitorState
	_, _ = readOptionalJSON(filepath.Join(r.containerDir(id), stateFile), &ms)
	ctr, err := libcontainer.Load(r.libcontainerRoot(), id)
	neverRan := !killed && ms.Pid == 0 && (errors.Is(err, libcontainer.ErrNotExist) || err == nil && execPending(r.libcontainerRoot(), id, ctr))
	if err == nil {
		_ = mon.SignalContainer(ctr, unix.SIGKILL)
	}
	exit := exitRecord{
		ExitCode:   128 + int(unix.SIGKILL),
		Signal:     int(unix.SIGKILL),
		FinishedAt: time.Now(),
		Message:    msg,
	}
	if neverRan {
		msg = "container monitor died before the container's process started; it never ran"
		exit = exitRecord{ExitCode: 128, Reason: reasonStartError, FinishedAt: exit.FinishedAt, Message: msg}
	}
	r.log.Warn("container monitor died, killing container", "id", id, "message", msg)
	return writeJSON(filepath.Join(r.containerDir(id), exitFile), exit)
}

// execPending reports whether the init of container id (ctr) still waits
// to be told to exec the container's process, and never will be, its
// monitor dead: runc's exec FIFO is there and the init, alive, holds it.
// The FIFO alone says nothing: the monitor removes it once the init wrote to
// it, and the init, which closes its handle on the FIFO once it wrote,
// execs the process whether or not the monitor lives on. An init gone is
// not known to have waited: it may have run and exited.
func execPending(root, id string, ctr *libcontainer.Container) bool {
	fifoPath := filepath.Join(root, id, "exec.fifo")
	fifo, err := os.Lstat(fifoPath)
	if err != nil || fifo.Mode().Type() != fs.ModeNamedPipe {
		return false
	}
	// As /proc names the init's handle on it: the daemon's own directory,
	// its links resolved.
	if fifoPath, err = filepath.EvalSymlinks(fifoPath); err != nil {
		return false
	}
	ls, err := ctr.State()
	if err != nil || ls.InitProcessPid <= 0 {
		return false
	}
	pid := ls.InitProcessPid
	same := func() bool { // the init, not a process with its pid since
		st, err := system.Stat(pid)
		return err == nil && st.StartTime == ls.InitProcessStartTime && st.State != system.Zombie
	}
	if !same() {
		return false
	}
	fdDir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	d, err := os.Open(fdDir)
	if err != nil {
		return false
	}
	// runc's init holds a few fds; the bound is for a process that is not it.
	names, _ := d.Readdirnames(maxInitFds)
	d.Close()
	holds := false
	for _, n := range names {
		// The link's name only, which touches no file system: a stat
		// through it would reach whatever file the process holds, one on a
		// FUSE mount it serves among them, and hang the daemon with its
		// lock held. A process that ran and names a file so is its own
		// container's, which is killed all the same: the record is all it
		// could change.
		if l, err := os.Readlink(filepath.Join(fdDir, n)); err == nil && l == fifoPath {
			holds = true
			break
		}
	}
	return holds && same()
}

// maxInitFds bounds the fds of a container's init execPending looks at.
const maxInitFds = 64
