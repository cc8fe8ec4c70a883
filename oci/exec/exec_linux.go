//go:build linux && cgo

package exec

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// execDrain is how long the output of an exec process that has exited is
// still read while nothing comes: a process it left in the background may
// hold its pipes (or terminal) open for ever.
const execDrain = 200 * time.Millisecond

// killWait bounds how long an exec process that outlived its deadline is
// waited for once killed.
const killWait = 10 * time.Second

// Helper is the program that runs the exec server (mon.ExecArg): the
// monitor's own program, or a binary with the monitor's roles (Reexec), and
// the environment it runs with.
type Helper struct {
	Path string
	Env  []string
}

// Run runs a process in ctr, a running container whose process is p and
// whose libcontainer state is under s's root, as `runc exec` does: it joins the
// container's namespaces and cgroup as the container's user, groups, working
// directory, capabilities, no_new_privs, AppArmor profile, SELinux label and
// seccomp filter, with the container's environment and es.Env over it. It
// returns the process's exit code (128+n when killed by signal n) once it
// has exited and its output has been copied. While it runs, its pid is
// recorded in the container's state directory stateDir, for KillLeftovers.
//
// The process is started by s's exec server (see mon.ExecArg), whose child
// it is: libcontainer's setns init re-executes the program of the process
// that starts it, so it runs the server's program, not the caller's.
// The process's standard streams or terminal are the caller's to copy all
// the same.
//
// It fails with podspec.ErrNotRunning for a container without a running
// process, podspec.ErrCommandNotFound or podspec.ErrCommandNotExecutable
// when the command cannot be started, and ctx's cause when the process
// outlived ctx: it is killed then, with its process group, and waited for
// at most killWait.
func Run(ctx context.Context, s *Server, ctr *libcontainer.Container, p *specs.Process, es podspec.ExecSpec, stateDir string, log *slog.Logger) (int, error) {
	// A container started a moment ago may still be in runc's init, or in
	// its execve, which libcontainer takes for a dead process (see
	// initExecing): wait for the exec to be done, a second at most.
	for wait := time.Now().Add(time.Second); initExecing(ctr) && ctx.Err() == nil && time.Now().Before(wait); {
		time.Sleep(5 * time.Millisecond)
	}
	st, err := ctr.Status()
	if err != nil {
		return -1, err
	} else if st != libcontainer.Running {
		return -1, fmt.Errorf("%w: it is %s", podspec.ErrNotRunning, st)
	}
	ps := *p
	ps.Args, ps.Env = es.Cmd, mergeEnv(p.Env, es.Env)
	hp := &helperProcess{server: s, id: ctr.ID(), spec: ps, es: es}
	return run(ctx, hp, es, stateDir, ctr.ID(), log, nil)
}

// RunInit runs ctr's init process, p with es's command, and streams it as Run
// streams an exec: ctr is a container just created, not started, as `runc
// run` in the foreground. started, if not nil, is called once the process
// runs. The process is the caller's child: it never outlives ctx, and the
// caller destroys ctr once RunInit returned.
func RunInit(ctx context.Context, ctr *libcontainer.Container, p *specs.Process, es podspec.ExecSpec, stateDir string, log *slog.Logger, started func()) (int, error) {
	ps := *p
	ps.Args, ps.Env = es.Cmd, mergeEnv(p.Env, es.Env)
	proc, err := mon.ExecProcess(&ps, es.TTY, es.Size.Width, es.Size.Height)
	if err != nil {
		return -1, err
	}
	proc.Init = true
	return run(ctx, &ownProcess{ctr: ctr, proc: proc, cmd: es.Cmd[0]}, es, stateDir, ctr.ID(), log, started)
}

// process is how run starts, waits for and kills the process it streams.
type process interface {
	// start starts it with the process's ends of its streams and returns
	// its pid, which is also its process group. When ctx ends first, what
	// it started is killed and it returns.
	start(ctx context.Context, cio childIO) (int, error)
	// wait returns its exit once it has exited and been reaped.
	wait() execResult
	// kill SIGKILLs it and its process group, unless it has been reaped.
	kill()
}

// childIO is what a process gets of its streams: each nil for none, stdout
// and stderr the same file for combined output; the console socket for a
// TTY.
type childIO struct {
	stdin, stdout, stderr, console *os.File
}

// run starts p and streams it until it exits or ctx ends; started, if not
// nil, is called once it runs. id names the container in the log.
func run(ctx context.Context, p process, es podspec.ExecSpec, stateDir, id string, log *slog.Logger, started func()) (int, error) {
	x := &execution{spec: es, exited: make(chan struct{})}
	defer x.close()
	cio, err := x.setup()
	if err != nil {
		return -1, err
	}
	if err := ctx.Err(); err != nil {
		return -1, context.Cause(ctx)
	}
	pid, err := p.start(ctx, cio)
	if err != nil {
		if ctx.Err() != nil {
			return -1, fmt.Errorf("%w (while starting: %v)", context.Cause(ctx), err)
		}
		return -1, err
	}
	record := filepath.Join(stateDir, execsDir, strconv.Itoa(pid))
	if err := os.MkdirAll(filepath.Dir(record), 0o700); err == nil {
		err = os.WriteFile(record, nil, 0o600)
	}
	if err != nil {
		log.Warn("record exec process", "id", id, "pid", pid, "err", err)
	}
	startErr := x.started()
	if startErr != nil {
		p.kill()
	} else if started != nil {
		started()
	}
	done := make(chan execResult, 1)
	go func() {
		res := p.wait()
		x.exit()
		_ = os.Remove(record)
		done <- res
	}()

	var res execResult
	select {
	case res = <-done:
	case <-ctx.Done():
		p.kill()
		t := time.NewTimer(killWait)
		defer t.Stop()
		select {
		case <-done:
			res = execResult{code: -1, err: context.Cause(ctx)}
		case <-t.C:
			return -1, fmt.Errorf("%w; process %d still there %v after SIGKILL", context.Cause(ctx), pid, killWait)
		}
	}
	x.copies.Wait()
	if startErr != nil {
		return -1, startErr
	}
	return res.code, res.err
}

// ownProcess is a process this one starts through libcontainer, as its
// child: a debug container's init.
type ownProcess struct {
	ctr  *libcontainer.Container
	proc *libcontainer.Process
	cmd  string // the command, for errors
	pid  int

	mu     sync.Mutex // guards reaped
	reaped bool
}

// start is not bounded by ctx: libcontainer starts the init in this
// process, and its caller (a debug container's run) ends with the container.
func (o *ownProcess) start(_ context.Context, cio childIO) (int, error) {
	// Assigned only when set: a nil *os.File in an io.Reader or Writer is
	// not a nil interface.
	if cio.stdin != nil {
		o.proc.Stdin = cio.stdin
	}
	if cio.stdout != nil {
		o.proc.Stdout = cio.stdout
	}
	if cio.stderr != nil {
		o.proc.Stderr = cio.stderr
	}
	o.proc.ConsoleSocket = cio.console
	if err := o.ctr.Run(o.proc); err != nil {
		return -1, commandError(err, o.cmd)
	}
	pid, err := o.proc.Pid()
	o.pid = pid
	return pid, err
}

// wait reaps the process only under mu, so that kill never signals a
// reused pid or process group.
func (o *ownProcess) wait() execResult {
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, o.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	o.mu.Lock()
	ps, err := o.proc.Wait()
	o.reaped = true
	o.mu.Unlock()
	if ps == nil {
		return execResult{code: -1, err: fmt.Errorf("wait for process %d: %w", o.pid, err)}
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return execResult{code: 128 + int(ws.Signal())}
	}
	return execResult{code: ps.ExitCode()}
}

// kill SIGKILLs the process and its process group (libcontainer's init made
// it a session leader), unless it has been reaped already.
func (o *ownProcess) kill() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.reaped {
		return
	}
	_ = unix.Kill(-o.pid, unix.SIGKILL)
	_ = unix.Kill(o.pid, unix.SIGKILL) // in case it left its group
}

// execsDir, in a container's state dir, has an empty file named after the
// pid of each exec process running, which is also its process group.
const execsDir = "exec"

// mergeEnv sets extra over env (NAME=value entries), by name, in order.
func mergeEnv(env []string, extra []podspec.EnvVar) []string {
	out := make([]string, 0, len(env)+len(extra))
	at := map[string]int{}
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		at[name] = len(out)
		out = append(out, kv)
	}
	for _, e := range extra {
		kv := e.Name + "=" + e.Value
		if i, ok := at[e.Name]; ok {
			out[i] = kv
			continue
		}
		at[e.Name] = len(out)
		out = append(out, kv)
	}
	return out
}

// commandError tells a command that could not be found or executed (the
// "exec: "name": ..." error of exec.LookPath in libcontainer's setns init)
// from other failures of Run. The init's error comes to Run as JSON, which
// has each byte of the name that is not UTF-8 as U+FFFD.
func commandError(err error, name string) error {
	msg := err.Error()
	prefix := "exec: " + strconv.Quote(name) + ": "
	i := strings.LastIndex(msg, prefix)
	if i < 0 {
		prefix = "exec: " + strconv.Quote(string([]rune(name))) + ": "
		i = strings.LastIndex(msg, prefix)
	}
	if i < 0 {
		return err
	}
	why := msg[i+len(prefix):]
	switch {
	case strings.Contains(why, "executable file not found"), strings.Contains(why, "no such file or directory"):
		return fmt.Errorf("%w: %s", podspec.ErrCommandNotFound, why)
	case strings.Contains(why, "permission denied"), strings.Contains(why, "is a directory"),
		strings.Contains(why, "exec format error"):
		return fmt.Errorf("%w: %s", podspec.ErrCommandNotExecutable, why)
	}
	return err
}

type execResult struct {
	code int
	err  error
}

// execution is the plumbing of one exec process: its standard streams or
// terminal, and the goroutines that copy them.
type execution struct {
	spec   podspec.ExecSpec
	exited chan struct{} // closed once the process has exited

	// child holds the process's ends (and the console socket), closed once
	// it started; ours the daemon's ends, closed when Run returns.
	child, ours []*os.File
	readers     []*os.File // ours that copy output
	stdinW      *os.File   // the write end of its stdin pipe, without TTY
	console     *os.File   // our end of the console socket, with TTY
	pty         *os.File   // the terminal's master, once received
	copies      sync.WaitGroup
}

// setup makes the process's standard streams, or a console socket for a
// TTY, and returns the process's ends.
func (x *execution) setup() (childIO, error) {
	var cio childIO
	if x.spec.TTY {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return cio, fmt.Errorf("console socket: %w", err)
		}
		x.console = os.NewFile(uintptr(fds[0]), "console-socket")
		child := os.NewFile(uintptr(fds[1]), "console-socket-child")
		x.ours = append(x.ours, x.console)
		x.child = append(x.child, child)
		cio.console = child
		return cio, nil
	}
	if x.spec.Stdin != nil {
		r, w, err := os.Pipe()
		if err != nil {
			return cio, fmt.Errorf("stdin pipe: %w", err)
		}
		x.child, x.ours, x.stdinW = append(x.child, r), append(x.ours, w), w
		cio.stdin = r
	}
	for _, o := range []struct {
		w   io.Writer
		set **os.File
	}{{x.spec.Stdout, &cio.stdout}, {x.spec.Stderr, &cio.stderr}} {
		if o.w == nil {
			continue // the process gets /dev/null
		}
		if o.set == &cio.stderr && sameWriter(x.spec.Stdout, x.spec.Stderr) {
			// One pipe for both, as os/exec does: the caller's writer
			// gets one write at a time, in the order they were made.
			cio.stderr = cio.stdout
			continue
		}
		r, w, err := os.Pipe()
		if err != nil {
			return cio, fmt.Errorf("output pipe: %w", err)
		}
		x.child, x.ours, x.readers = append(x.child, w), append(x.ours, r), append(x.readers, r)
		*o.set = w
		x.copies.Go(func() { x.copyOut(r, o.w) })
	}
	return cio, nil
}

// sameWriter says whether a and b are the same writer (os/exec's
// interfaceEqual: writers of types that cannot be compared are different).
func sameWriter(a, b io.Writer) (same bool) {
	defer func() { _ = recover() }()
	return a == b
}

// started runs once the process is told to exec: it closes the process's
// ends, and for a TTY receives the terminal's master and starts copying.
func (x *execution) started() error {
	for _, f := range x.child {
		_ = f.Close()
	}
	x.child = nil
	if x.stdinW != nil {
		go func() {
			_, _ = io.Copy(x.stdinW, x.spec.Stdin)
			_ = x.stdinW.Close()
		}()
	}
	if !x.spec.TTY {
		return nil
	}
	pty, err := recvFile(x.console)
	if err != nil {
		return fmt.Errorf("receive the terminal: %w", err)
	}
	x.pty = pty
	x.ours = append(x.ours, pty)
	x.readers = append(x.readers, pty)
	if x.spec.Stdout != nil {
		x.copies.Go(func() { x.copyOut(pty, x.spec.Stdout) })
	} else {
		x.copies.Go(func() { x.copyOut(pty, io.Discard) })
	}
	if x.spec.Stdin != nil {
		go func() { _, _ = io.Copy(pty, x.spec.Stdin) }()
	}
	if x.spec.Resize != nil {
		go x.resize(pty)
	}
	return nil
}

// resize applies the terminal sizes es.Resize delivers until the process
// has exited.
func (x *execution) resize(pty *os.File) {
	rc, err := pty.SyscallConn()
	if err != nil {
		return
	}
	for {
		select {
		case <-x.exited:
			return
		case sz, ok := <-x.spec.Resize:
			if !ok {
				return
			}
			ws := &unix.Winsize{Row: sz.Height, Col: sz.Width}
			_ = rc.Control(func(fd uintptr) { _ = unix.IoctlSetWinsize(int(fd), unix.TIOCSWINSZ, ws) })
		}
	}
}

// copyOut copies r to w until EOF (EIO for a terminal whose every user has
// gone), or, once the process has exited, until nothing came for execDrain.
// A failed Write drops the rest rather than leaving the process blocked.
func (x *execution) copyOut(r *os.File, w io.Writer) {
	buf := make([]byte, 32*1024)
	for {
		n, err := r.Read(buf)
		if n > 0 && w != nil {
			if _, werr := w.Write(buf[:n]); werr != nil {
				w = nil
			}
		}
		if err != nil {
			return
		}
		select {
		case <-x.exited:
			_ = r.SetReadDeadline(time.Now().Add(execDrain))
		default:
		}
	}
}

// exit says the process has exited: its output is read until nothing
// comes for execDrain.
func (x *execution) exit() {
	close(x.exited)
	for _, r := range x.readers {
		_ = r.SetReadDeadline(time.Now().Add(execDrain))
	}
}

// close closes every file of the execution, which ends the copies, and
// waits for them: none writes to the caller's writers once Run returned.
func (x *execution) close() {
	for _, f := range append(x.child, x.ours...) {
		_ = f.Close()
	}
	x.copies.Wait()
}

// recvFile receives the file descriptor that libcontainer's init sends over
// the console socket (with its name as data), as a non-blocking file, so that
// reads of it can have deadlines.
func recvFile(sock *os.File) (*os.File, error) {
	name := make([]byte, 4096)
	oob := make([]byte, unix.CmsgSpace(4))
	rc, err := sock.SyscallConn()
	if err != nil {
		return nil, err
	}
	var n, oobn int
	var rerr error
	err = rc.Control(func(fd uintptr) {
		for {
			n, oobn, _, _, rerr = unix.Recvmsg(int(fd), name, oob, unix.MSG_CMSG_CLOEXEC)
			if !errors.Is(rerr, unix.EINTR) {
				return
			}
		}
	})
	if err == nil {
		err = rerr
	}
	if err != nil {
		return nil, fmt.Errorf("recvmsg: %w", err)
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, m := range msgs {
		rights, err := unix.ParseUnixRights(&m)
		if err == nil {
			fds = append(fds, rights...)
		}
	}
	if len(fds) != 1 {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return nil, fmt.Errorf("got %d file descriptors, want 1", len(fds))
	}
	if err := unix.SetNonblock(fds[0], true); err != nil {
		_ = unix.Close(fds[0])
		return nil, err
	}
	return os.NewFile(uintptr(fds[0]), string(name[:n])), nil
}

// KillLeftovers kills the exec processes that an earlier daemon left
// when it died: the processes in each container's cgroup whose process group
// is one it recorded. (A process group ID is not reused while one of its
// processes lives.) The containers' state directories are in
// containersDir, their libcontainer state in libcontainerRoot. Failures
// are logged. When ctx ends it stops and returns ctx's cause.
func KillLeftovers(ctx context.Context, containersDir, libcontainerRoot string, log *slog.Logger) error {
	records, err := filepath.Glob(filepath.Join(containersDir, "*", execsDir, "*"))
	if err != nil || len(records) == 0 {
		return nil
	}
	groups := map[string]map[int]bool{}
	for _, rec := range records {
		id := filepath.Base(filepath.Dir(filepath.Dir(rec)))
		if pg, err := strconv.Atoi(filepath.Base(rec)); err == nil {
			if groups[id] == nil {
				groups[id] = map[int]bool{}
			}
			groups[id][pg] = true
		}
	}
	for id, pgs := range groups {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if ctr, err := libcontainer.Load(libcontainerRoot, id); err == nil {
			pids, err := ctr.Processes()
			if err != nil {
				log.Warn("list container processes for leftover execs", "id", id, "err", err)
			}
			for _, pid := range pids {
				if killInGroups(pid, pgs) {
					log.Info("killed an exec process an earlier daemon left", "id", id, "pid", pid)
				}
			}
		}
		if err := os.RemoveAll(filepath.Join(containersDir, id, execsDir)); err != nil {
			log.Warn("remove exec records", "id", id, "err", err)
		}
	}
	return nil
}

// killInGroups SIGKILLs process pid if its process group is one of pgs.
func killInGroups(pid int, pgs map[int]bool) bool {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	// Asked after the pidfd is open: if pid was reused meanwhile, the pidfd
	// names a process that is gone and the signal goes nowhere.
	if pg, err := unix.Getpgid(pid); err != nil || !pgs[pg] {
		return false
	}
	return unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil
}

// initExecing reports whether the init process of ctr has not finished its
// execve yet: it is still runc's init (runc:[2:INIT]), told to exec a moment
// ago. runc's init is multi-threaded, and while the kernel ends its other
// threads for an exec from one of them the thread-group leader shows as a
// zombie: libcontainer's status then says Stopped, and an exec joining it
// fails. Under load a postStart hook met that window.
func initExecing(ctr *libcontainer.Container) bool {
	cs, err := ctr.State()
	if err != nil || cs.InitProcessPid <= 0 {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cs.InitProcessPid))
	if err != nil {
		return false
	}
	startTime, execing := statExecing(string(b))
	return execing && startTime == cs.InitProcessStartTime
}

// statExecing parses a /proc/<pid>/stat line: the process's start time, and
// whether it is still runc's init (its exec not done, or the init dead
// before it, which its monitor reaps at once).
func statExecing(stat string) (startTime uint64, execing bool) {
	// The command name may hold spaces and parentheses: fields follow the
	// last ')'.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 || !strings.HasSuffix(stat[:i], "(runc:[2:INIT]") {
		return 0, false
	}
	f := strings.Fields(stat[i+1:])
	// f[19] is field 22, starttime.
	if len(f) < 20 {
		return 0, false
	}
	startTime, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, false
	}
	return startTime, true
}
