//go:build linux && cgo

package oci

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer/system"
	"golang.org/x/sys/unix"
)

// startPoll is how often awaitStart looks for the pid of a container that
// an earlier daemon's monitor is starting.
const startPoll = 10 * time.Millisecond

// unresponsiveAfter is how long a monitor has to record the exit of a
// container whose init died of the daemon's SIGKILL.
const unresponsiveAfter = 5 * time.Second

func (r *Runtime) isStarting(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.starting[id]
}

// awaitStart waits until monitor m, which an earlier daemon told to start
// container id, records the container's pid or its exit, or exits. A start
// still going at deadline hung: its monitor is killed, as the daemon that
// began it would have, and its exit recorded as a lost monitor's. It returns
// false if ctx ended first, true when there is something new to look at.
func (r *Runtime) awaitStart(ctx context.Context, id string, m *monitor, deadline time.Time) bool {
	dir := r.containerDir(id)
	tick := time.NewTicker(startPoll)
	defer tick.Stop()
	hung := time.NewTimer(time.Until(deadline))
	defer hung.Stop()
	for {
		var ms monitorState
		if ok, err := readOptionalJSON(filepath.Join(dir, stateFile), &ms); err != nil || (ok && ms.Pid > 0) {
			return true
		}
		if _, err := os.Stat(filepath.Join(dir, exitFile)); err == nil {
			return true
		}
		select {
		case <-m.done:
			return true
		case <-ctx.Done():
			return false
		case <-hung.C:
			r.log.Warn("container start of an earlier daemon hung, killing its monitor", "id", id, "monitor", m.pid)
			m.kill(fmt.Sprintf("container start did not finish within %v; container killed", r.cfg.StartTimeout))
			t := time.NewTimer(killWait)
			defer t.Stop()
			select {
			case <-m.done:
			case <-t.C:
			}
			return true
		case <-tick.C:
		}
	}
}

// abortStart ends the start of container id, which has no process yet, if
// sig is one that would have ended it: its monitor is killed.
func (r *Runtime) abortStart(id string, sig syscall.Signal) error {
	if sig != unix.SIGKILL && sig != unix.SIGTERM {
		return nil
	}
	m, err := r.monitorOf(id)
	if err != nil {
		return fmt.Errorf("signal container %s: %w", id, err)
	}
	if m == nil {
		return nil // its exit is being recorded
	}
	r.log.Info("container signalled before it started, aborting its start", "id", id, "signal", sig)
	m.kill(fmt.Sprintf("container start aborted by %s; container killed", unix.SignalName(sig)))
	return nil
}

// watchKill makes sure that the exit of container id, just sent SIGKILL, is
// recorded: if its init (pid) is gone or a zombie and its monitor has not
// recorded the exit within unresponsiveAfter, the monitor is stopped or
// wedged. It is killed then, and monitorLost records the exit.
func (r *Runtime) watchKill(id string, pid int) {
	m, err := r.monitorOf(id)
	if err != nil || m == nil {
		return
	}
	time.AfterFunc(unresponsiveAfter, func() {
		if m.exited() || !processGone(pid) {
			return
		}
		if _, err := os.Stat(filepath.Join(r.containerDir(id), exitFile)); err == nil {
			return
		}
		r.log.Warn("container monitor unresponsive, killing it", "id", id, "monitor", m.pid)
		m.kill(fmt.Sprintf("container monitor unresponsive %v after SIGKILL; container killed", unresponsiveAfter))
	})
}

// processGone says whether process pid has exited, reaped or not.
func processGone(pid int) bool {
	stat, err := system.Stat(pid)
	return err != nil || stat.State == system.Zombie || stat.State == system.Dead
}
