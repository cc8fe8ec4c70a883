//go:build linux && cgo

package monitor

import (
	"errors"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	"github.com/opencontainers/runc/libcontainer/system"
	"golang.org/x/sys/unix"
)

// SignalContainer is libcontainer's Container.Signal without its descriptor
// leak. For a container it loaded rather than started, libcontainer signals the
// init through os.FindProcess and never releases the Process, so each signal
// left a pidfd open until a garbage collection happened to close it (the chaos
// soak saw an idle daemon holding a handful of pidfds of processes long gone).
//
// Here the init's pidfd is opened first and its start time checked after, so a
// reused pid is never signalled (libcontainer checks, then opens), and the
// pidfd is closed before returning. SIGKILL to a container without a PID
// namespace of its own goes to every process of its cgroup, as libcontainer
// does (cgroup.kill, or a frozen cgroup's pids), which opens no handle.
//
// It returns libcontainer.ErrNotRunning if the init is gone.
func SignalContainer(ctr *libcontainer.Container, sig unix.Signal) error {
	if sig == unix.SIGKILL && !ctr.Config().Namespaces.IsPrivate(configs.NEWPID) {
		return ctr.Signal(sig)
	}
	st, err := ctr.State()
	if err != nil {
		return err
	}
	if st.InitProcessPid <= 0 {
		return libcontainer.ErrNotRunning
	}
	fd, err := unix.PidfdOpen(st.InitProcessPid, 0)
	if errors.Is(err, unix.ESRCH) {
		return libcontainer.ErrNotRunning
	}
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// The pidfd pins the process: if its start time is the one recorded,
	// it is the container's init.
	stat, err := system.Stat(st.InitProcessPid)
	if err != nil || stat.StartTime != st.InitProcessStartTime ||
		stat.State == system.Zombie || stat.State == system.Dead {
		return libcontainer.ErrNotRunning
	}
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return libcontainer.ErrNotRunning
		}
		return err
	}
	return nil
}
