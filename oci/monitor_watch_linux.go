//go:build linux && cgo

package oci

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/opencontainers/runc/libcontainer/system"
	"golang.org/x/sys/unix"
)

// monitor is the daemon's handle on a container's monitor process.
type monitor struct {
	pid  int
	done chan struct{} // closed once the monitor has exited
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
	id  string // the ID of the container it will run
	m   *monitor
	goW *os.File // write end of its go pipe
	rep *os.File // read end of its report pipe
}

// startMonitor starts the monitor of a future container id; see monitorArg.
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
	cmd := exec.Command("/proc/self/exe", monitorArg, r.libcontainerRoot(), r.containerDir(id), id)
	cmd.Args[0] = "staticpodd-monitor"
	cmd.Dir = "/"
	cmd.ExtraFiles = []*os.File{repW, goR}
	cmd.Env = monitorEnv(os.Environ())
	// Its own session: signals to the daemon's process group never reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	_, _ = repW.Close(), goR.Close()
	if err != nil {
		_, _ = repR.Close(), goW.Close()
		return nil, fmt.Errorf("start monitor of container %s: %w", id, err)
	}
	m := &monitor{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit file, not the monitor's status, tells the story
		close(m.done)
	}()
	return &pendingMonitor{id: id, m: m, goW: goW, rep: repR}, nil
}

// run tells the monitor that its container's spec and record are written and
// returns once it reported the container's init process, or its failure.
func (p *pendingMonitor) run() (monitorReport, error) {
	// A monitor that died already cannot read: its report pipe says so.
	_, _ = p.goW.Write([]byte{1})
	_ = p.goW.Close()
	defer p.rep.Close()
	var rep monitorReport
	data, err := readAll(p.rep)
	if err == nil {
		err = decodeReport(data, &rep)
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

// abandon tells a monitor that was not run to exit.
func (p *pendingMonitor) abandon() {
	_, _ = p.goW.Close(), p.rep.Close()
}

// adoptMonitor finds the monitor a previous daemon started, by the pid and
// start time it recorded. It returns nil if that monitor is gone.
func adoptMonitor(st monitorState) (*monitor, error) {
	if st.MonitorPid <= 0 {
		return nil, nil
	}
	fd, err := unix.PidfdOpen(st.MonitorPid, 0)
	if errors.Is(err, unix.ESRCH) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("pidfd_open monitor %d: %w", st.MonitorPid, err)
	}
	// The pidfd pins the process: if its start time matches now, it is ours.
	if stat, err := system.Stat(st.MonitorPid); err != nil || stat.StartTime != st.MonitorStart ||
		stat.State == system.Zombie || stat.State == system.Dead {
		_ = unix.Close(fd)
		return nil, nil
	}
	m := &monitor{pid: st.MonitorPid, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		defer unix.Close(fd)
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); !errors.Is(err, unix.EINTR) {
				return
			}
		}
	}()
	return m, nil
}

// monitorEnv is the daemon's environment minus what belongs to the daemon
// alone (systemd notification and socket activation).
func monitorEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		switch k, _, _ := strings.Cut(kv, "="); k {
		case "NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID", "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID":
			continue
		}
		out = append(out, kv)
	}
	return out
}
