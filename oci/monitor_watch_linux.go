//go:build linux && cgo

package oci

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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

// spawnMonitor starts the monitor of container id and returns once it
// reported the container's init process, or its failure. The monitor is
// registered from the moment it runs, so a concurrent status sees it.
func (r *Runtime) spawnMonitor(id string) (monitorReport, error) {
	dir := r.containerDir(id)
	logf, err := os.OpenFile(filepath.Join(dir, monitorLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return monitorReport{}, fmt.Errorf("open monitor log of container %s: %w", id, err)
	}
	defer logf.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		return monitorReport{}, fmt.Errorf("report pipe for container %s: %w", id, err)
	}
	defer pr.Close()
	cmd := exec.Command("/proc/self/exe", monitorArg, r.libcontainerRoot(), dir, id)
	cmd.Args[0] = "staticpodd-monitor"
	cmd.Dir = "/"
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.ExtraFiles = []*os.File{pw}
	cmd.Env = monitorEnv(os.Environ())
	// Its own session: signals to the daemon's process group never reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	_ = pw.Close()
	if err != nil {
		return monitorReport{}, fmt.Errorf("start monitor of container %s: %w", id, err)
	}
	m := &monitor{pid: cmd.Process.Pid, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait() // the exit file, not the monitor's status, tells the story
		close(m.done)
	}()
	r.mu.Lock()
	r.monitors[id] = m
	r.mu.Unlock()

	var rep monitorReport
	data, err := readAll(pr)
	if err == nil {
		err = decodeReport(data, &rep)
	}
	if err == nil && rep.Error != "" {
		err = errors.New(rep.Error)
	}
	if err != nil {
		<-m.done
		return rep, fmt.Errorf("monitor of container %s: %w", id, err)
	}
	return rep, nil
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
