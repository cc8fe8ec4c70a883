//go:build linux && cgo

package monitor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"sync"
	"syscall"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// ExecArg is argv[1] of an exec helper: the process that runs one process in
// a running container for the daemon, as `runc exec` does. Its command line is
//
//	staticpodd-monitor __staticpodd_exec <libcontainer-root> <id>
//
// with a stream socket as fd 3, over which the daemon sends one ExecRequest
// and the helper answers ExecReports (see RunExecHelper). libcontainer's
// setns init re-executes the program of the process that calls Container.Run:
// run from the monitor's own program, the helper and that init each pay for
// its start-up, not the daemon's.
//
// SIGTERM tells the helper to SIGKILL the process and its process group (the
// setns init made it a session leader). The helper is the process's parent:
// it reaps it, so a kill never meets a reused pid. It keeps running when the
// daemon goes (EOF on fd 3): so does the process, which the next daemon kills
// (exec.KillLeftovers).
const ExecArg = "__staticpodd_exec"

// MaxExecRequest bounds an ExecRequest: the container's process with its
// environment, sensitive values included (MaxSecretEnv), and the command.
const MaxExecRequest = 2*MaxSecretEnv + 1<<20

// ExecRequest is what the daemon asks of an exec helper.
type ExecRequest struct {
	// Process is the container's, with the exec's arguments and environment.
	Process specs.Process `json:"process"`
	// TTY gives the process a terminal of Width × Height, whose master
	// the setns init sends over the console socket.
	TTY    bool   `json:"tty,omitempty"`
	Width  uint16 `json:"width,omitempty"`
	Height uint16 `json:"height,omitempty"`
	// The helper's descriptors that become the process's standard input,
	// output and error, and the console socket; 0 for none (the process
	// gets /dev/null).
	Stdin   int `json:"stdin,omitempty"`
	Stdout  int `json:"stdout,omitempty"`
	Stderr  int `json:"stderr,omitempty"`
	Console int `json:"console,omitempty"`
}

// ExecReport is a line an exec helper writes: first the process's pid or why
// it did not start, then, once it has exited and been reaped, its exit.
type ExecReport struct {
	Pid int `json:"pid,omitempty"`
	// Error says why the process did not start; NotRunning, if not
	// empty, that the container's status (NotRunning) is why.
	Error      string `json:"error,omitempty"`
	NotRunning string `json:"notRunning,omitempty"`
	// Exited says Code is the process's exit code (128+n when killed by
	// signal n).
	Exited bool `json:"exited,omitempty"`
	Code   int  `json:"code,omitempty"`
}

// runExec is the exec helper's main.
func runExec(args []string) int {
	ctl := os.NewFile(3, "control")
	enc := json.NewEncoder(ctl)
	fail := func(err error) int {
		_ = enc.Encode(ExecReport{Error: cutMessage(err.Error())})
		return 1
	}
	if len(args) != 2 {
		return fail(fmt.Errorf("exec helper: want <libcontainer-root> <id>, got %q", args))
	}
	// It lives as long as its process, allocating next to nothing once it
	// started.
	debug.SetGCPercent(-1)
	debug.SetMemoryLimit(startMemoryLimit)
	term := make(chan os.Signal, 1)
	signal.Notify(term, unix.SIGTERM)
	// The request holds the container's sensitive environment: no core
	// dump of this process may.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fail(fmt.Errorf("make the exec helper non-dumpable: %w", err))
	}
	var req ExecRequest
	if err := json.NewDecoder(io.LimitReader(ctl, MaxExecRequest)).Decode(&req); err != nil {
		return fail(fmt.Errorf("read the exec request: %w", err))
	}
	ctr, err := libcontainer.Load(args[0], args[1])
	if err != nil {
		return fail(err)
	}
	proc, files, err := req.process()
	if err != nil {
		return fail(err)
	}
	err = ctr.Run(proc)
	// The process has its own copies: the daemon sees EOF once it closed
	// them.
	for _, f := range files {
		_ = f.Close()
	}
	if err != nil {
		rep := ExecReport{Error: cutMessage(err.Error())}
		if st, serr := ctr.Status(); serr == nil && st != libcontainer.Running {
			rep.NotRunning = st.String()
		}
		_ = enc.Encode(rep)
		return 1
	}
	pid, err := proc.Pid()
	if err != nil {
		return fail(err)
	}
	// The daemon may be gone: the process runs on, and is reaped.
	_ = enc.Encode(ExecReport{Pid: pid})
	// Its stderr was the daemon's, for libcontainer's log and a panic
	// while starting; held for as long as the process runs, it would keep
	// open what a supervisor reads the daemon's output from after the
	// daemon died.
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		_ = unix.Dup3(int(null.Fd()), 2, 0)
		_ = null.Close()
	}

	var mu sync.Mutex // guards reaped: no signal after the reap
	reaped := false
	go func() {
		<-term
		mu.Lock()
		defer mu.Unlock()
		if !reaped {
			_ = unix.Kill(-pid, unix.SIGKILL)
			_ = unix.Kill(pid, unix.SIGKILL) // in case it left its group
		}
	}()
	var info unix.Siginfo
	for {
		if err := unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil); !errors.Is(err, unix.EINTR) {
			break
		}
	}
	mu.Lock()
	ps, err := proc.Wait()
	reaped = true
	mu.Unlock()
	if ps == nil {
		return fail(fmt.Errorf("wait for process %d: %w", pid, err))
	}
	rep := ExecReport{Exited: true, Code: ps.ExitCode()}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		rep.Code = 128 + int(ws.Signal())
	}
	_ = enc.Encode(rep)
	return 0
}

// process is libcontainer's process for req, and the helper's files it
// hands the process.
func (req *ExecRequest) process() (*libcontainer.Process, []*os.File, error) {
	lp, err := ExecProcess(&req.Process, req.TTY, req.Width, req.Height)
	if err != nil {
		return nil, nil, err
	}
	var files []*os.File
	file := func(fd int) *os.File {
		if fd <= 2 {
			return nil
		}
		for _, f := range files {
			if int(f.Fd()) == fd {
				return f
			}
		}
		f := os.NewFile(uintptr(fd), "exec-"+fmt.Sprint(fd))
		files = append(files, f)
		return f
	}
	// Assigned only when set: a nil *os.File in an io.Reader or Writer is
	// not a nil interface.
	if f := file(req.Stdin); f != nil {
		lp.Stdin = f
	}
	if f := file(req.Stdout); f != nil {
		lp.Stdout = f
	}
	if f := file(req.Stderr); f != nil {
		lp.Stderr = f
	}
	lp.ConsoleSocket = file(req.Console)
	return lp, files, nil
}

// ExecProcess converts the container's process p, with the exec's arguments
// and environment, to the one an exec runs, as runc exec does (runc's
// newProcess): the container's user, groups, working directory, rlimits and
// security settings; a terminal of width × height if tty.
func ExecProcess(p *specs.Process, tty bool, width, height uint16) (*libcontainer.Process, error) {
	lp, err := NewProcess(p)
	if err != nil {
		return nil, err
	}
	lp.Init = false
	lp.AppArmorProfile = p.ApparmorProfile
	lp.Label = p.SelinuxLabel
	lp.Scheduler = p.Scheduler
	lp.IOPriority = p.IOPriority
	if c := p.Capabilities; c != nil {
		lp.Capabilities = &configs.Capabilities{
			Bounding: c.Bounding, Effective: c.Effective, Inheritable: c.Inheritable,
			Permitted: c.Permitted, Ambient: c.Ambient,
		}
	}
	if tty {
		lp.ConsoleWidth, lp.ConsoleHeight = width, height
	}
	return lp, nil
}
