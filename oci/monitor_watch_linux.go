//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer/system"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/oci/cgroupv1mounts"
	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// killWait bounds how long a start that failed waits for its killed monitor
// to exit before it removes the container's state anyway.
const killWait = 10 * time.Second

// monitor is the daemon's handle on a container's monitor process.
type monitor struct {
	pid   int
	start uint64        // /proc/<pid>/stat starttime; 0 if unknown
	pidfd *os.File      // signals go through it: never to another process
	done  chan struct{} // closed once the monitor has exited

	mu sync.Mutex
	// killedFor says why the daemon killed the monitor, for the exit that
	// monitorLost records; guarded by mu.
	killedFor string
	// gone is set, and waiters emptied, as the monitor's exit is seen;
	// waiters are afterExit's, each called by whoever takes it out of the
	// map: the exit or its context's end. Guarded by mu.
	gone    bool
	waiters map[*exitWaiter]struct{}
}

// exitWaiter is one afterExit: f, and the release of its context's hook.
type exitWaiter struct {
	f    func()
	stop func() bool
}

func newMonitor(pid int, start uint64, pidfd *os.File) *monitor {
	return &monitor{pid: pid, start: start, pidfd: pidfd, done: make(chan struct{})}
}

// afterExit calls f once, in a goroutine of its own, when the monitor has
// exited or ctx has ended, whichever comes first (at once if either has).
// Until then it holds no goroutine: a container that runs costs its pod's
// worker a map entry here, not a goroutine parked on done.
func (m *monitor) afterExit(ctx context.Context, f func()) {
	w := &exitWaiter{f: f}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.gone {
		go f()
		return
	}
	if m.waiters == nil {
		m.waiters = map[*exitWaiter]struct{}{}
	}
	m.waiters[w] = struct{}{}
	// Registered under mu, so markExited sees stop set. Called in a
	// goroutine of its own, at once if ctx has ended already.
	w.stop = context.AfterFunc(ctx, func() {
		m.mu.Lock()
		_, mine := m.waiters[w]
		delete(m.waiters, w)
		m.mu.Unlock()
		if mine {
			f()
		}
	})
}

// markExited records the monitor's exit: every afterExit waiting is called,
// then done is closed.
func (m *monitor) markExited() {
	m.mu.Lock()
	m.gone = true
	ws := m.waiters
	m.waiters = nil
	m.mu.Unlock()
	for w := range ws {
		w.stop() // the context's hook; its call, if it started, finds nothing
		go w.f()
	}
	close(m.done)
}

// kill SIGKILLs the monitor through its pidfd and remembers why, so that
// monitorLost records the container's exit with that reason. Killing an
// exited monitor does nothing.
func (m *monitor) kill(reason string) {
	m.mu.Lock()
	if m.killedFor == "" {
		m.killedFor = reason
	}
	m.mu.Unlock()
	rc, err := m.pidfd.SyscallConn()
	if err != nil {
		return
	}
	// Control fails once onExit closed the pidfd: the monitor is gone.
	_ = rc.Control(func(fd uintptr) {
		_ = unix.PidfdSendSignal(int(fd), unix.SIGKILL, nil, 0)
	})
}

// signal sends sig to the monitor through its pidfd; an exited monitor is
// not signalled.
func (m *monitor) signal(sig unix.Signal) {
	rc, err := m.pidfd.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.PidfdSendSignal(int(fd), sig, nil, 0)
	})
}

// reason returns why the daemon killed the monitor, or "".
func (m *monitor) reason() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.killedFor
}

func (m *monitor) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// pendingMonitor is a monitor process started ahead of its container: the
// binary's start-up (exec, Go runtime, package initialisation) takes longer
// than anything else the daemon does for a container, so it runs while the
// daemon prepares the rootfs and writes the spec, or even before the container
// is asked for (see Runtime.spare). It waits on its go pipe.
type pendingMonitor struct {
	id   string // the ID of the container it will run
	m    *monitor
	proc *os.Process
	goW  *os.File // write end of its go pipe
	rep  *os.File // read end of its report pipe
}

// startMonitor starts the monitor of a future container id; see mon.StartArg.
func (r *Runtime) startMonitor(id string) (*pendingMonitor, error) {
	repR, repW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("report pipe for monitor of container %s: %w", id, err)
	}
	goR, goW, err := os.Pipe()
	if err != nil {
		_, _ = repR.Close(), repW.Close()
		return nil, fmt.Errorf("go pipe for monitor of container %s: %w", id, err)
	}
	cmd := exec.Command(r.monitorPath, mon.StartArg, r.libcontainerRoot(), r.containerDir(id), id)
	cmd.Args[0] = mon.Name
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{repW, goR}
	cmd.Env = monitorEnv(os.Environ())
	if mounts := cgroupv1mounts.Encoded(); mounts != "" {
		// Read once here, not again by each monitor.
		cmd.Env = append(cmd.Env, cgroupv1mounts.Env+"="+mounts)
	}
	// Its own session: signals to the daemon's process group never reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	_, _ = repW.Close(), goR.Close()
	if err != nil {
		_, _ = repR.Close(), goW.Close()
		return nil, fmt.Errorf("start monitor of container %s: %w", id, err)
	}
	// Not reaped until cmd.Wait: the pid is still the monitor's.
	pidfd, err := openPidfd(cmd.Process.Pid)
	var stat system.Stat_t
	if err == nil {
		// Recorded with the container, so that a later daemon can adopt
		// the monitor before it wrote its own state.
		if stat, err = system.Stat(cmd.Process.Pid); err != nil {
			_ = pidfd.Close()
		}
	}
	if err != nil {
		_ = cmd.Process.Kill()
		_, _, _ = cmd.Wait(), repR.Close(), goW.Close()
		return nil, fmt.Errorf("watch monitor of container %s: %w", id, err)
	}
	m := newMonitor(cmd.Process.Pid, stat.StartTime, pidfd)
	// Waited for in the netpoller, not a blocked thread; then reaped. The
	// wait keeps the process alone, not cmd: its environment, arguments and
	// files would stay in the heap as long as the container runs, about
	// 5 KiB a running container for nothing (cmd.Wait, with no pipes and
	// no context of cmd's own, is the process's Wait).
	proc := cmd.Process
	onExit(pidfd, func() {
		_, _ = proc.Wait() // the exit file, not the monitor's status, tells the story
		m.markExited()
	})
	return &pendingMonitor{id: id, m: m, proc: proc, goW: goW, rep: repR}, nil
}

// run tells the monitor that its container's spec and record are written,
// hands it secretEnv (mon.EncodeSecretEnv: the values the spec lacks), and
// returns once it reported the container's init process, or its failure.
// When ctx ends first, it returns ctx's cause; the caller kills the monitor.
func (p *pendingMonitor) run(ctx context.Context, secretEnv []byte) (mon.Report, error) {
	// A monitor that died already cannot read: its report pipe says so. One
	// that stopped reading is not waited for past ctx: a cut secretEnv is
	// one the monitor refuses.
	if d, ok := ctx.Deadline(); ok {
		_ = p.goW.SetWriteDeadline(d)
	}
	_, _ = p.goW.Write(append([]byte{1}, secretEnv...))
	_ = p.goW.Close()
	type result struct {
		data []byte
		err  error
	}
	// Buffered: the reader ends when the monitor exits or is killed.
	read := make(chan result, 1)
	go func() {
		defer p.rep.Close()
		data, err := readAll(p.rep)
		read <- result{data, err}
	}()
	var res result
	select {
	case res = <-read:
	case <-ctx.Done():
		return mon.Report{}, fmt.Errorf("monitor of container %s: %w", p.id, context.Cause(ctx))
	}
	var rep mon.Report
	err := res.err
	if err == nil {
		err = decodeReport(res.data, &rep)
	}
	if err == nil && rep.Error != "" {
		err = errors.New(rep.Error)
	}
	if err != nil {
		<-p.m.done
		return rep, fmt.Errorf("monitor of container %s: %w", p.id, err)
	}
	return rep, nil
}

// kill ends a monitor whose container is not wanted: one waiting for its go
// pipe, or one whose start failed or hangs. It returns once the monitor has
// exited, or after killWait.
func (p *pendingMonitor) kill() {
	_, _ = p.goW.Close(), p.rep.Close()
	_ = p.proc.Kill() // through Go's pidfd: never another process
	t := time.NewTimer(killWait)
	defer t.Stop()
	select {
	case <-p.m.done:
	case <-t.C:
	}
}

// adoptMonitor finds the monitor a previous daemon started, by the pid and
// start time it recorded. It returns nil if that monitor is gone.
func adoptMonitor(st monitorState) (*monitor, error) {
	if st.MonitorPid <= 0 {
		return nil, nil
	}
	fd, err := openPidfd(st.MonitorPid)
	// ENOENT: the pid names a thread now, not a process (the monitor's pid
	// was recycled for a thread of another process): gone as well. A
	// daemon restarted after its monitors died on a busy machine meets it.
	// Kernels before pidfs said EINVAL for it, which they say for a flag
	// they lack too: a thread is told by its thread group.
	if errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) && !leadsProcess(st.MonitorPid) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("monitor %d: %w", st.MonitorPid, err)
	}
	// The pidfd pins the process: if its start time matches now, it is ours.
	// Whether it has exited, the pidfd says, not /proc's state: a monitor
	// whose exec into the C monitor (or the exit recorder) is under way from
	// a thread other than its first shows that thread as a zombie until the
	// exec completes, though the process lives on.
	if stat, err := system.Stat(st.MonitorPid); err != nil || stat.StartTime != st.MonitorStart || pidfdExited(fd) {
		_ = fd.Close()
		return nil, nil
	}
	m := newMonitor(st.MonitorPid, st.MonitorStart, fd)
	onExit(fd, m.markExited)
	return m, nil
}

// leadsProcess says whether pid is a process rather than a thread of
// another: a thread has a /proc entry too, though no listing shows it.
// Unsure (/proc unreadable), it says so.
func leadsProcess(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	_, tgid, found := strings.Cut(string(b), "\nTgid:\t")
	tgid, _, _ = strings.Cut(tgid, "\n")
	return err != nil || !found || tgid == strconv.Itoa(pid)
}

// openPidfd opens a non-blocking pidfd of process pid, so that awaitExit can
// wait for it in Go's netpoller rather than in a thread of its own.
func openPidfd(pid int) (*os.File, error) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	return os.NewFile(uintptr(fd), "pidfd"), nil
}

// pidfdExited says whether the process of pidfd has exited: its whole
// thread group, not only its first thread. (Through SyscallConn: Fd would
// take the pidfd out of the netpoller that awaitExit waits in.)
func pidfdExited(pidfd *os.File) bool {
	rc, err := pidfd.SyscallConn()
	if err != nil {
		return false
	}
	exited := false
	_ = rc.Control(func(fd uintptr) { exited, _ = pollPidfd(fd, 0) })
	return exited
}

// pollPidfd waits up to timeout ms (-1: for ever) for pidfd fd to become
// readable, which it does once its process has exited.
func pollPidfd(fd uintptr, timeout int) (bool, error) {
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	for {
		n, err := unix.Poll(fds, timeout)
		if !errors.Is(err, unix.EINTR) {
			return n > 0, err
		}
	}
}

// awaitExit blocks until the process of pidfd has exited (a pidfd becomes
// readable then), and closes pidfd.
func awaitExit(pidfd *os.File) {
	defer pidfd.Close()
	// A poll that fails for another reason ends the wait: it would not
	// succeed again.
	exited := func(fd uintptr, timeout int) bool {
		ok, err := pollPidfd(fd, timeout)
		return ok || err != nil
	}
	rc, err := pidfd.SyscallConn()
	if err == nil {
		err = rc.Read(func(fd uintptr) bool { return exited(fd, 0) })
	}
	if err == nil {
		return
	}
	// Not in the netpoller after all: block a thread instead.
	for !exited(pidfd.Fd(), -1) {
	}
}

// monitorEnv is the daemon's environment minus what belongs to the daemon
// alone (systemd notification, socket activation, and the directory of its
// credentials, which only the daemon reads), and cgroup mounts that are the
// daemon's to give (cgroupv1mounts).
func monitorEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID",
			"CREDENTIALS_DIRECTORY", cgroupv1mounts.Env:
			continue
		}
		out = append(out, kv)
	}
	return out
}
