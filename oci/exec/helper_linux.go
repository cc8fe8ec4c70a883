//go:build linux && cgo

package exec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"

	"github.com/opencontainers/runc/libcontainer"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// maxHelperReports bounds what is read of an exec helper's reports: two
// short JSON lines, the first with an error cut to the monitor's bound.
const maxHelperReports = 64 << 10

// helperProcess is a process that an exec helper (mon.ExecArg) starts in
// the container and reaps.
type helperProcess struct {
	helper   Helper
	root, id string
	spec     specs.Process // the exec's
	es       podspec.ExecSpec

	cmd *exec.Cmd     // the helper, once started
	ctl *os.File      // our end of its control socket
	dec *json.Decoder // its reports
	pid int           // the process's, as the helper reported it
}

func (hp *helperProcess) start(ctx context.Context, cio childIO) (int, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("exec helper's socket: %w", err)
	}
	ctl, theirs := os.NewFile(uintptr(fds[0]), "exec-control"), os.NewFile(uintptr(fds[1]), "exec-control-child")
	defer theirs.Close()
	cmd := exec.Command(hp.helper.Path, mon.ExecArg, hp.root, hp.id)
	cmd.Args[0] = mon.Name
	cmd.Dir = "/"
	cmd.Env = hp.helper.Env
	// libcontainer's log, and what a helper that fails before it can
	// report says, go where the caller's own do (until the process runs:
	// see mon.ExecArg).
	cmd.Stderr = os.Stderr
	// Its own session: a signal to the caller's process group (the
	// terminal's ^C of `staticpodd exec`) leaves the process reaped.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.ExtraFiles = []*os.File{theirs}
	fd := func(f *os.File) int {
		if f == nil {
			return 0
		}
		for i, e := range cmd.ExtraFiles {
			if e == f {
				return 3 + i
			}
		}
		cmd.ExtraFiles = append(cmd.ExtraFiles, f)
		return 2 + len(cmd.ExtraFiles)
	}
	req := mon.ExecRequest{
		Process: hp.spec, TTY: hp.es.TTY, Width: hp.es.Size.Width, Height: hp.es.Size.Height,
		Stdin: fd(cio.stdin), Stdout: fd(cio.stdout), Stderr: fd(cio.stderr), Console: fd(cio.console),
	}
	if err := cmd.Start(); err != nil {
		_ = ctl.Close()
		return -1, fmt.Errorf("start the exec helper: %w", err)
	}
	hp.cmd, hp.ctl = cmd, ctl
	// The start is bounded by ctx, as the process is: a helper that does
	// not report (its setns init frozen as it joins the cgroup of a pod
	// whose cgroup is frozen, a stopped helper) is killed when ctx ends,
	// and our end of the socket shut, which ends the wait for its report
	// though its children hold its end (the frozen init, which exits once
	// thawed); failed reaps it. Killed after it reported, wait finds it
	// gone and kills the process (killOrphan).
	stop := context.AfterFunc(ctx, func() {
		_ = cmd.Process.Kill()
		if rc, err := ctl.SyscallConn(); err == nil {
			_ = rc.Control(func(fd uintptr) { _ = unix.Shutdown(int(fd), unix.SHUT_RDWR) })
		}
	})
	defer stop()
	hp.dec = json.NewDecoder(io.LimitReader(ctl, maxHelperReports))
	var rep mon.ExecReport
	if err := json.NewEncoder(ctl).Encode(&req); err != nil {
		return -1, hp.failed(fmt.Errorf("send the exec helper its request: %w", err))
	}
	if err := hp.dec.Decode(&rep); err != nil {
		return -1, hp.failed(fmt.Errorf("read the exec helper's report: %w", err))
	}
	switch {
	case rep.NotRunning != "":
		_ = hp.finish()
		return -1, fmt.Errorf("%w: it is %s", podspec.ErrNotRunning, rep.NotRunning)
	case rep.Error != "":
		_ = hp.finish()
		return -1, commandError(errors.New(rep.Error), hp.es.Cmd[0])
	case rep.Pid <= 0:
		return -1, hp.failed(fmt.Errorf("the exec helper reported pid %d", rep.Pid))
	}
	hp.pid = rep.Pid
	return rep.Pid, nil
}

// failed ends a helper that could not say what it started: it is killed
// (its process, if any, is then its next daemon's to kill) and reaped.
func (hp *helperProcess) failed(err error) error {
	_ = hp.cmd.Process.Kill()
	if werr := hp.finish(); werr != nil {
		err = fmt.Errorf("%w (helper: %v)", err, werr)
	}
	return err
}

// finish reaps the helper.
func (hp *helperProcess) finish() error {
	err := hp.cmd.Wait()
	_ = hp.ctl.Close()
	return err
}

func (hp *helperProcess) wait() execResult {
	var rep mon.ExecReport
	err := hp.dec.Decode(&rep)
	if werr := hp.finish(); err == nil && !rep.Exited {
		err = fmt.Errorf("the exec helper reported no exit: %s (helper: %v)", rep.Error, werr)
	} else if err != nil {
		err = fmt.Errorf("read the exec helper's report: %w (helper: %v)", err, werr)
	}
	if err != nil {
		hp.killOrphan()
		return execResult{code: -1, err: err}
	}
	return execResult{code: rep.Code}
}

// killOrphan SIGKILLs the process group of the process whose helper ended
// without its exit (the OOM killer, an operator's kill): no one else would
// kill or reap it, and its record goes with the exec. Only the container's
// processes are looked at, as KillLeftovers does, so a reused pid outside
// it is never signalled.
func (hp *helperProcess) killOrphan() {
	ctr, err := libcontainer.Load(hp.root, hp.id)
	if err != nil {
		return
	}
	pids, _ := ctr.Processes()
	for _, pid := range pids {
		killInGroups(pid, map[int]bool{hp.pid: true})
	}
}

// kill asks the helper, which reaps the process, to kill it: the helper is
// not reaped before wait, so its pid is its own.
func (hp *helperProcess) kill() {
	_ = hp.cmd.Process.Signal(unix.SIGTERM)
}
