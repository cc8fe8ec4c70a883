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
	"sync"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// maxServerReports bounds what is read of an exec's reports: two short JSON
// lines, the first with an error cut to the monitor's bound.
const maxServerReports = 64 << 10

// Server starts execs through an exec server (mon.ExecArg) run from a
// Helper: started at the first exec, and told to exit once no exec ran for
// a while, so that frequent execs (probes) pay for no process start of
// their own beyond the setns init's. The zero value is not usable: see
// NewServer.
type Server struct {
	helper Helper
	root   string        // the containers' libcontainer root
	idle   time.Duration // how long a server is kept without an exec

	mu     sync.Mutex
	cur    *serverProc // the one new execs go to; nil for none
	closed bool
}

// NewServer returns a Server for the containers whose libcontainer state is
// under root, whose exec servers run from h and exit once no exec ran for
// idle.
func NewServer(h Helper, root string, idle time.Duration) *Server {
	return &Server{helper: h, root: root, idle: idle}
}

// Close tells the running exec server, if any, to exit once its processes
// have exited; an exec after Close starts one that exits after it.
func (s *Server) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if s.cur != nil {
		s.cur.retire()
		s.cur = nil
	}
}

// serverProc is one exec server process.
type serverProc struct {
	ctl   *os.File      // our end of its control socket
	done  chan struct{} // closed once it exited and was reaped
	execs int           // in flight; guarded by the Server's mu
	idle  *time.Timer   // retires it after the Server's idle without an exec
}

// retire closes the control socket: the server exits once its processes
// have.
func (p *serverProc) retire() {
	if p.idle != nil {
		p.idle.Stop()
	}
	_ = p.ctl.Close()
}

// acquire returns the running exec server, or starts one, counting an exec
// in flight on it until release.
func (s *Server) acquire() (*serverProc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p := s.cur; p != nil {
		select {
		case <-p.done:
			// Died (killed, or its own error): its socket and idle timer
			// go with it, not when the collector finds them.
			s.cur = nil
			p.retire()
		default:
			if p.idle != nil {
				p.idle.Stop()
			}
			p.execs++
			return p, nil
		}
	}
	p, err := s.start()
	if err != nil {
		return nil, err
	}
	p.execs++
	if !s.closed {
		s.cur = p
	}
	return p, nil
}

// release ends an exec on p: once none is in flight, p is retired after
// the Server's idle (at once if it is no longer the current one).
func (s *Server) release(p *serverProc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.execs--; p.execs > 0 {
		return
	}
	if s.cur != p {
		p.retire()
		return
	}
	p.idle = time.AfterFunc(s.idle, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cur == p && p.execs == 0 {
			s.cur = nil
			p.retire()
		}
	})
}

// forget makes the execs after one that p failed before ctx ended start a new
// server: p died (it closes its sockets a moment before it can be reaped,
// which acquire sees), or no longer serves.
func (s *Server) forget(ctx context.Context, p *serverProc) {
	if ctx.Err() != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == p {
		s.cur = nil
	}
}

// start starts an exec server.
func (s *Server) start() (*serverProc, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("exec server's socket: %w", err)
	}
	ctl, theirs := os.NewFile(uintptr(fds[0]), "exec-control"), os.NewFile(uintptr(fds[1]), "exec-control-server")
	defer theirs.Close()
	cmd := exec.Command(s.helper.Path, mon.ExecArg, s.root)
	cmd.Args[0] = mon.Name
	cmd.Dir = "/"
	cmd.Env = s.helper.Env
	// libcontainer's log, and what a server says as it fails, go where
	// the caller's own do (until the caller closes the control socket:
	// see mon.ExecArg).
	cmd.Stderr = os.Stderr
	// Its own session: a signal to the caller's process group (the
	// terminal's ^C of `staticpodd exec`) leaves its processes reaped.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	cmd.ExtraFiles = []*os.File{theirs}
	if err := cmd.Start(); err != nil {
		_ = ctl.Close()
		return nil, fmt.Errorf("start the exec server: %w", err)
	}
	p := &serverProc{ctl: ctl, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// send hands p one exec: conn, its socket, then files, before ctx ends.
// Execs share the control socket, so a send does not wait on it with a
// deadline of its own: a server whose socket is full (one that no longer
// reads) is polled until ctx ends.
func (p *serverProc) send(ctx context.Context, conn *os.File, files []*os.File) error {
	fds := []int{int(conn.Fd())}
	for _, f := range files {
		fds = append(fds, int(f.Fd()))
	}
	rc, err := p.ctl.SyscallConn()
	if err != nil {
		return err
	}
	for {
		var serr error
		if err := rc.Control(func(fd uintptr) {
			serr = unix.Sendmsg(int(fd), []byte{0}, unix.UnixRights(fds...), nil, unix.MSG_DONTWAIT)
		}); err != nil {
			return err
		}
		if !errors.Is(serr, unix.EAGAIN) {
			return serr
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// helperProcess is a process that an exec server starts in the container
// and reaps.
type helperProcess struct {
	server *Server
	id     string
	spec   specs.Process // the exec's
	es     podspec.ExecSpec

	sp   *serverProc   // the server, once acquired
	conn *os.File      // our end of the exec's socket
	dec  *json.Decoder // its reports
	pid  int           // the process's, as the server reported it
}

// start is bounded by ctx: a server or a container that hangs the start (a
// setns init frozen as it joins the cgroup of a frozen pod) does not hold
// the caller, and the server is asked to kill what it started.
func (hp *helperProcess) start(ctx context.Context, cio childIO) (int, error) {
	pid, gone, err := hp.try(ctx, cio)
	if gone && ctx.Err() == nil {
		// The server died before it took the exec (killed a moment before
		// it could be reaped, which acquire would have seen): nothing of
		// the exec started, and a new server takes it.
		pid, _, err = hp.try(ctx, cio)
	}
	return pid, err
}

// try is one start on the running (or a new) server; gone says that the
// server went away before it took the exec, which then did not start.
func (hp *helperProcess) try(ctx context.Context, cio childIO) (_ int, gone bool, _ error) {
	var files []*os.File
	fd := func(f *os.File) int {
		if f == nil {
			return 0
		}
		for i, e := range files {
			if e == f {
				return 1 + i
			}
		}
		files = append(files, f)
		return len(files)
	}
	req := mon.ExecRequest{
		ID: hp.id, Process: hp.spec, TTY: hp.es.TTY, Width: hp.es.Size.Width, Height: hp.es.Size.Height,
		Stdin: fd(cio.stdin), Stdout: fd(cio.stdout), Stderr: fd(cio.stderr), Console: fd(cio.console),
	}
	b, err := json.Marshal(&req)
	if err != nil {
		return -1, false, fmt.Errorf("the exec request: %w", err)
	}
	if len(b) > mon.MaxExecRequest {
		// The server would refuse it and close the exec's socket, which
		// says nothing of why (and would cost a server start a try).
		return -1, false, fmt.Errorf("the exec request (the container's environment with the exec's command and environment) is %d bytes as JSON, over the exec server's bound of %d", len(b), mon.MaxExecRequest)
	}
	sp, err := hp.server.acquire()
	if err != nil {
		return -1, false, err
	}
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		hp.server.release(sp)
		return -1, false, fmt.Errorf("exec's socket: %w", err)
	}
	conn, theirs := os.NewFile(uintptr(fds[0]), "exec"), os.NewFile(uintptr(fds[1]), "exec-server")
	hp.sp, hp.conn = sp, conn
	// Once ctx has ended (not at its deadline, which may come a moment
	// before ctx says so), the start's reads and writes fail. halt stops
	// that, or waits until it is done, and says whether ctx ended: the
	// kill a failed start writes must not meet a deadline set after it.
	cut := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = conn.SetDeadline(time.Now())
		close(cut)
	})
	halt := sync.OnceValue(func() bool {
		if stop() {
			return false
		}
		<-cut
		return true
	})
	defer halt()
	failed := func(err error) error {
		halt()
		return hp.failed(err)
	}
	err = sp.send(ctx, theirs, files)
	// Ours closed at once: the message holds the server's, so a server that
	// dies before it answers ends the reads below (EOF), not ctx alone.
	_ = theirs.Close()
	if err != nil {
		hp.server.forget(ctx, sp)
		return -1, true, failed(fmt.Errorf("hand the exec server the exec: %w", err))
	}
	hp.dec = json.NewDecoder(io.LimitReader(conn, maxServerReports))
	var rep mon.ExecReport
	if n, err := conn.Write(append(b, '\n')); err != nil {
		// The server holds the exec's socket but closed it (it went away)
		// before the request was all on it. Until its last byte was, the
		// server read no request and started nothing of the exec; once it
		// was, the server may have started it (the newline, which the
		// server does not wait for, can be left to a later write): then
		// it is not handed to another server.
		hp.server.forget(ctx, sp)
		return -1, n < len(b), failed(fmt.Errorf("send the exec server the request: %w", err))
	}
	if err := hp.dec.Decode(&rep); err != nil {
		hp.server.forget(ctx, sp)
		return -1, false, failed(fmt.Errorf("read the exec server's report: %w", err))
	}
	if halt() {
		// ctx ended as the report came: the process may run, and must not.
		return -1, false, hp.failed(context.Cause(ctx))
	}
	_ = conn.SetDeadline(time.Time{})
	switch {
	case rep.NotRunning != "":
		hp.finish()
		return -1, false, fmt.Errorf("%w: it is %s", podspec.ErrNotRunning, rep.NotRunning)
	case rep.Error != "":
		hp.finish()
		return -1, false, commandError(errors.New(rep.Error), hp.es.Cmd[0])
	case rep.Pid <= 0:
		return -1, false, hp.failed(fmt.Errorf("the exec server reported pid %d", rep.Pid))
	}
	hp.pid = rep.Pid
	return rep.Pid, false, nil
}

// failed ends an exec whose process's start could not be seen through: the
// server is told to kill the process if it started one (its pid is
// otherwise its next daemon's to kill).
func (hp *helperProcess) failed(err error) error {
	hp.kill()
	hp.finish()
	return err
}

// finish closes the exec's socket and releases its server.
func (hp *helperProcess) finish() {
	_ = hp.conn.Close()
	hp.server.release(hp.sp)
}

func (hp *helperProcess) wait() execResult {
	var rep mon.ExecReport
	err := hp.dec.Decode(&rep)
	hp.finish()
	if err == nil && !rep.Exited {
		err = fmt.Errorf("the exec server reported no exit: %s", rep.Error)
	} else if err != nil {
		err = fmt.Errorf("read the exec server's report: %w", err)
	}
	if err != nil {
		hp.killOrphan()
		return execResult{code: -1, err: err}
	}
	return execResult{code: rep.Code}
}

// killOrphan SIGKILLs the process group of the process whose server ended
// without its exit (the OOM killer, an operator's kill): no one else would
// kill or reap it, and its record goes with the exec. Only the container's
// processes are looked at, as KillLeftovers does, so a reused pid outside
// it is never signalled.
func (hp *helperProcess) killOrphan() {
	ctr, err := libcontainer.Load(hp.server.root, hp.id)
	if err != nil {
		return
	}
	pids, _ := ctr.Processes()
	for _, pid := range pids {
		killInGroups(pid, map[int]bool{hp.pid: true})
	}
}

// kill asks the server, which reaps the process, to kill it. A server that
// does not take the request at once (its socket full, or gone) is not waited
// for: wait then sees the end of its reports.
func (hp *helperProcess) kill() {
	b, _ := json.Marshal(mon.ExecKill{Kill: true})
	_ = hp.conn.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = hp.conn.Write(append(b, '\n'))
}
