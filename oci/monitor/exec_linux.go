//go:build linux && cgo

package monitor

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// ExecArg is argv[1] of the exec server: the process that runs processes in
// running containers for the daemon, as `runc exec` does. Its command line is
//
//	staticpodd-monitor __staticpodd_exec <libcontainer-root>
//
// with a SOCK_SEQPACKET socket as fd 3, its control socket. Each message the
// daemon sends there is one exec: one byte, and descriptors, first a stream
// socket for the exec, then the files its ExecRequest names. Over that socket
// the daemon sends the ExecRequest, and the server answers ExecReports (see
// serveExec). libcontainer's setns init re-executes the program of the process
// that calls Container.Run: run from the monitor's own program, that init
// pays for its start-up, not the daemon's; and one server serves every exec
// while it runs, so an exec costs one Go start (the init's), not two.
//
// The daemon ends the server by closing its end of the control socket (it
// does once no exec ran for a while, and when it exits or dies): the server
// then lets go of the daemon's stderr and exits once the processes it runs
// have exited. It is the parent of each process it starts: it reaps it, so a
// kill (ExecKill) never meets a reused pid. The next daemon kills what it
// left running (exec.KillLeftovers).
const ExecArg = "__staticpodd_exec"

// MaxExecRequest bounds an ExecRequest: the container's process with its
// environment, sensitive values included (MaxSecretEnv), and the command.
const MaxExecRequest = 2*MaxSecretEnv + 1<<20

// MaxExecFiles bounds the descriptors of one exec's message on the control
// socket: the exec's socket, and standard input, output, error and the
// console socket.
const MaxExecFiles = 5

// execServerMemoryLimit is where the exec server's heap is collected hard: far
// above what the requests in flight hold (each at most MaxExecRequest, most a
// few KiB).
const execServerMemoryLimit = 64 << 20

// ExecRequest is what the daemon asks of the exec server, once per exec.
type ExecRequest struct {
	// ID is the container's, under the server's libcontainer root.
	ID string `json:"id"`
	// Process is the container's, with the exec's arguments and environment.
	Process specs.Process `json:"process"`
	// TTY gives the process a terminal of Width × Height, whose master
	// the setns init sends over the console socket.
	TTY    bool   `json:"tty,omitempty"`
	Width  uint16 `json:"width,omitempty"`
	Height uint16 `json:"height,omitempty"`
	// Which of the exec message's descriptors (1 for the first after the
	// exec's socket) become the process's standard input, output and
	// error, and the console socket; 0 for none (the process gets
	// /dev/null).
	Stdin   int `json:"stdin,omitempty"`
	Stdout  int `json:"stdout,omitempty"`
	Stderr  int `json:"stderr,omitempty"`
	Console int `json:"console,omitempty"`
}

// ExecKill, sent by the daemon over an exec's socket after its request, makes
// the server SIGKILL the process and its process group (the setns init made
// it a session leader), unless it has been reaped. The end of the socket
// kills nothing: a daemon that died leaves the process running, as it would
// leave a `runc exec`.
type ExecKill struct {
	Kill bool `json:"kill"`
}

// ExecReport is a line the exec server writes over an exec's socket: first
// the process's pid or why it did not start, then, once it has exited and
// been reaped, its exit.
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

// runExec is the exec server's main.
func runExec(args []string) int {
	if len(args) != 1 {
		fmt.Fprintf(os.Stderr, "exec server: want <libcontainer-root>, got %q\n", args)
		return 2
	}
	// Requests hold the containers' sensitive environment: no core dump of
	// this process may.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintf(os.Stderr, "exec server: make it non-dumpable: %v\n", err)
		return 1
	}
	debug.SetMemoryLimit(execServerMemoryLimit)
	warmUp()
	root := args[0]
	strays := newStrayReaper(strayAfter)
	go strays.run(nil)
	var execs sync.WaitGroup
	for {
		files, err := recvExec(3)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(os.Stderr, "exec server: %v\n", err)
			}
			break
		}
		if files == nil {
			continue // a message without the exec's socket
		}
		execs.Go(func() { serveExec(root, files, strays) })
	}
	// After an error other than the daemon's close, the daemon's sends
	// must fail (it then starts another server), not wait on a socket no
	// one reads.
	_ = unix.Close(3)
	// The daemon is gone, or done with this server. Holding its stderr for
	// as long as the processes run would keep open what a supervisor reads
	// the daemon's output from.
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		_ = unix.Dup3(int(null.Fd()), 2, 0)
		_ = null.Close()
	}
	execs.Wait()
	return 0
}

// recvExec receives one exec's message from the control socket ctl: the
// exec's socket, made non-blocking so that closing it ends a read, and the
// files its request names. It returns io.EOF once the daemon closed its end,
// nil files for a message with no descriptor.
func recvExec(ctl int) ([]*os.File, error) {
	var b [1]byte
	oob := make([]byte, unix.CmsgSpace(MaxExecFiles*4))
	var n, oobn, flags int
	var err error
	for {
		n, oobn, flags, _, err = unix.Recvmsg(ctl, b[:], oob, unix.MSG_CMSG_CLOEXEC)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("receive an exec: %w", err)
	}
	var fds []int
	if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
		for _, m := range msgs {
			if rights, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, rights...)
			}
		}
	}
	if n == 0 && len(fds) == 0 {
		return nil, io.EOF
	}
	if len(fds) == 0 || flags&unix.MSG_CTRUNC != 0 {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return nil, nil
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return nil, nil
	}
	files := make([]*os.File, len(fds))
	for i, fd := range fds {
		files[i] = os.NewFile(uintptr(fd), "exec-"+strconv.Itoa(i))
	}
	return files, nil
}

// serveExec runs one exec: files[0] is its socket, the rest the files its
// request names. The process's exit is reported once it has been reaped;
// strays leaves it to serveExec until then.
func serveExec(root string, files []*os.File, strays *strayReaper) {
	conn := files[0]
	defer conn.Close()
	defer func() {
		for _, f := range files[1:] {
			_ = f.Close()
		}
	}()
	enc := json.NewEncoder(conn)
	fail := func(err error) { _ = enc.Encode(ExecReport{Error: cutMessage(err.Error())}) }
	dec := json.NewDecoder(io.LimitReader(conn, MaxExecRequest))
	var req ExecRequest
	if err := dec.Decode(&req); err != nil {
		fail(fmt.Errorf("read the exec request: %w", err))
		return
	}
	ctr, err := libcontainer.Load(root, req.ID)
	if err != nil {
		fail(err)
		return
	}
	proc, err := req.process(files[1:])
	if err != nil {
		fail(err)
		return
	}
	// Until serveExec waits for its process, what the start leaves a
	// zombie (the process itself, if it exited at once) is not a stray.
	run := strays.begin()
	err = ctr.Run(proc)
	// The process has its own copies: the daemon sees EOF once it closed
	// them.
	for _, f := range files[1:] {
		_ = f.Close()
	}
	files = files[:1]
	if err != nil {
		strays.end(run) // libcontainer waited for what it waits for
		rep := ExecReport{Error: cutMessage(err.Error())}
		if st, serr := ctr.Status(); serr == nil && st != libcontainer.Running {
			rep.NotRunning = st.String()
		}
		_ = enc.Encode(rep)
		return
	}
	pid, err := proc.Pid()
	if err != nil {
		strays.end(run)
		fail(err)
		return
	}
	strays.wait(pid)
	defer strays.done(pid)
	strays.end(run)
	// The daemon may be gone: the process runs on, and is reaped.
	_ = enc.Encode(ExecReport{Pid: pid})

	var mu sync.Mutex // guards reaped: no signal after the reap
	reaped := false
	go func() {
		// Until a kill, or the socket's end: the daemon's close, or
		// ours once the exit is reported.
		for {
			var k ExecKill
			if err := dec.Decode(&k); err != nil {
				return
			}
			if !k.Kill {
				continue
			}
			mu.Lock()
			if !reaped {
				_ = unix.Kill(-pid, unix.SIGKILL)
				_ = unix.Kill(pid, unix.SIGKILL) // in case it left its group
			}
			mu.Unlock()
			return
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
		fail(fmt.Errorf("wait for process %d: %w", pid, err))
		return
	}
	rep := ExecReport{Exited: true, Code: ps.ExitCode()}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		rep.Code = 128 + int(ws.Signal())
	}
	_ = enc.Encode(rep)
}

// process is libcontainer's process for req, with the files of its exec's
// message (the ones after its socket) as the request names them.
func (req *ExecRequest) process(files []*os.File) (*libcontainer.Process, error) {
	lp, err := ExecProcess(&req.Process, req.TTY, req.Width, req.Height)
	if err != nil {
		return nil, err
	}
	file := func(i int) (*os.File, error) {
		switch {
		case i == 0:
			return nil, nil
		case i < 0 || i > len(files):
			return nil, fmt.Errorf("exec request names file %d of %d", i, len(files))
		}
		return files[i-1], nil
	}
	var f [4]*os.File
	for i, n := range []int{req.Stdin, req.Stdout, req.Stderr, req.Console} {
		if f[i], err = file(n); err != nil {
			return nil, err
		}
	}
	// Assigned only when set: a nil *os.File in an io.Reader or Writer is
	// not a nil interface.
	if f[0] != nil {
		lp.Stdin = f[0]
	}
	if f[1] != nil {
		lp.Stdout = f[1]
	}
	if f[2] != nil {
		lp.Stderr = f[2]
	}
	lp.ConsoleSocket = f[3]
	return lp, nil
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
