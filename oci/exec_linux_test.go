//go:build linux && cgo

package oci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// execEnv is one running pod with a container to exec in.
type execEnv struct {
	*env
	pod *podspec.Pod
	st  podspec.ContainerStatus
}

// runningContainer starts a container that runs until killed; setup changes
// it first.
func runningContainer(t *testing.T, setup func(*podspec.Container)) *execEnv {
	t.Helper()
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	return runningIn(t, e, pod, "main", setup)
}

// runningIn starts in pod (whose sandbox e made) a container name that runs
// until killed; setup changes it first. The test's end removes it and the
// sandbox.
func runningIn(t *testing.T, e *env, pod *podspec.Pod, name string, setup func(*podspec.Container)) *execEnv {
	t.Helper()
	c := e.container(pod, name, "echo up; while :; do sleep 1; done")
	if setup != nil {
		setup(c)
	}
	st := e.start(pod, c)
	waitLog(t, c.LogPath, "stdout F up")
	t.Cleanup(func() {
		_ = e.rt.Signal(context.Background(), st.ID, 9)
		e.wait(st.ID)
		e.destroy(st.ID)
		if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
			t.Error(err)
		}
	})
	return &execEnv{env: e, pod: pod, st: st}
}

// run execs cmd and returns its exit code, stdout and stderr.
func (x *execEnv) run(t *testing.T, es podspec.ExecSpec) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	es.Stdout, es.Stderr = &out, &errOut
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code, err := x.rt.Exec(ctx, x.st.ID, es)
	if err != nil {
		t.Fatalf("Exec %q: %v", es.Cmd, err)
	}
	return code, out.String(), errOut.String()
}

func TestExecExitCodeOutputAndEnv(t *testing.T) {
	x := runningContainer(t, func(c *podspec.Container) {
		c.Env = []podspec.EnvVar{{Name: "FROM_POD", Value: "pod"}, {Name: "OVER", Value: "pod"}}
		c.WorkingDir = "/tmp"
	})
	code, out, errOut := x.run(t, podspec.ExecSpec{
		Cmd: []string{"sh", "-c", `echo "$FROM_POD $OVER $EXTRA $PATH $(pwd)"; echo oops >&2; exit 3`},
		Env: []podspec.EnvVar{{Name: "OVER", Value: "exec"}, {Name: "EXTRA", Value: "x"}},
	})
	if code != 3 || out != "pod exec x /bin /tmp\n" || errOut != "oops\n" {
		t.Errorf("exit %d, stdout %q, stderr %q; want 3, %q, %q", code, out, errOut, "pod exec x /bin /tmp\n", "oops\n")
	}
	code, out, _ = x.run(t, podspec.ExecSpec{Cmd: []string{"cat"}, Stdin: strings.NewReader("fed\nto stdin")})
	if code != 0 || out != "fed\nto stdin" {
		t.Errorf("cat: exit %d, stdout %q; want what stdin had", code, out)
	}
	// No writers: the output goes nowhere, and the exit code still comes.
	code, err := x.rt.Exec(context.Background(), x.st.ID, podspec.ExecSpec{Cmd: []string{"sh", "-c", "echo lost; exit 7"}})
	if code != 7 || err != nil {
		t.Errorf("without writers: %d, %v; want 7", code, err)
	}
}

func TestExecRunsAsTheContainerUser(t *testing.T) {
	uid, gid := int64(1234), int64(2345)
	x := runningContainer(t, func(c *podspec.Container) {
		c.Security.RunAsUser, c.Security.RunAsGroup = &uid, &gid
		c.Security.SupplementalGroups = []int64{3456}
		c.Security.NoNewPrivileges = true
	})
	_, out, _ := x.run(t, podspec.ExecSpec{Cmd: []string{"sh", "-c", "id -u; id -g; id -G; grep -E '^(NoNewPrivs|CapEff)' /proc/self/status"}})
	want := "1234\n2345\n2345 3456\nCapEff:\t0000000000000000\nNoNewPrivs:\t1\n"
	if out != want {
		t.Errorf("exec as the container's user printed %q, want %q", out, want)
	}
}

// TestExecJoinsTheContainer finds the exec'd process on the host: it is in
// the container's cgroups and namespaces.
func TestExecJoinsTheContainer(t *testing.T) {
	x := runningContainer(t, nil)
	marker := "exec-" + randHex(4)
	stdinR, stdinW := io.Pipe()
	lines := newLineWriter()
	done := make(chan error, 1)
	go func() {
		_, err := x.rt.Exec(context.Background(), x.st.ID, podspec.ExecSpec{
			Cmd: []string{"sh", "-c", "echo ready; read x", marker}, Stdin: stdinR, Stdout: lines,
		})
		done <- err
	}()
	lines.await(t, "ready")
	pid := childWith(t, marker)
	for _, f := range []string{"cgroup", "ns/mnt", "ns/pid", "ns/net", "ns/ipc", "ns/uts"} {
		if got, want := procInfo(t, pid, f), procInfo(t, x.st.Pid, f); got != want {
			t.Errorf("exec process %d has %s %q, the container's init %q", pid, f, got, want)
		}
	}
	if self := procInfo(t, os.Getpid(), "ns/pid"); procInfo(t, pid, "ns/pid") == self {
		t.Errorf("exec process is in the test's PID namespace")
	}
	_ = stdinW.Close() // read x ends with EOF
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestExecTimeoutKillsTheProcessGroup(t *testing.T) {
	x := runningContainer(t, nil)
	marker := "exec-" + randHex(4)
	// sleep is sh's child, not sh itself: the whole group must go. On a
	// loaded machine the timeout may come before sh said anything, or even
	// before it started: what the exec left is looked for once it returned,
	// not found while it runs (which raced with the timeout's kill).
	_, err := x.rt.Exec(context.Background(), x.st.ID, podspec.ExecSpec{
		Cmd: []string{"sh", "-c", "sleep 1000 & echo ready; wait; echo never", marker}, Timeout: time.Second,
	})
	if !errors.Is(err, podspec.ErrExecTimeout) {
		t.Fatalf("Exec = %v, want ErrExecTimeout", err)
	}
	waitNoneLeft(t, x, func(cmdline string) bool { return strings.Contains(cmdline, marker) || cmdline == "sleep 1000" })
	if recs, _ := os.ReadDir(x.rt.containerDir(x.st.ID) + "/" + execsDir); len(recs) > 0 {
		t.Errorf("exec records still there: %v", recs)
	}

	done := make(chan error, 1)
	marker = "exec-" + randHex(4)
	// A cancelled context does the same, to the processes found running.
	ctx, cancel := context.WithCancel(context.Background())
	lines := newLineWriter()
	go func() {
		_, err := x.rt.Exec(ctx, x.st.ID, podspec.ExecSpec{Cmd: []string{"sh", "-c", "echo ready; sleep 1000; echo never", marker}, Stdout: lines})
		done <- err
	}()
	lines.await(t, "ready")
	sh := childWith(t, marker)
	sleep := childOf(t, sh)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Exec = %v, want context.Canceled", err)
	}
	waitPidExit(t, sh, 5*time.Second)
	waitPidExit(t, sleep, 5*time.Second)
}

// An exec server that dies before its process (the OOM killer, an
// operator's kill) takes the process with it: nobody else would reap or
// kill it, and its record is gone with the exec.
func TestExecServerDeathKillsTheProcess(t *testing.T) {
	x := runningContainer(t, nil)
	marker := "exec-" + randHex(4)
	lines := newLineWriter()
	done := make(chan error, 1)
	go func() {
		_, err := x.rt.Exec(context.Background(), x.st.ID, podspec.ExecSpec{
			Cmd: []string{"sh", "-c", "sleep 1000 & echo ready; wait", marker}, Stdout: lines,
		})
		done <- err
	}()
	lines.await(t, "ready")
	sh := childWith(t, marker)
	sleep := childOf(t, sh)
	server := findProc(func(pid, _ int, _ []string) bool { return isExecServer(pid) && childOfPid(pid, sh) })
	if server == 0 {
		t.Fatalf("no exec server is the parent of %d", sh)
	}
	if err := unix.Kill(server, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err == nil {
		t.Errorf("Exec whose server was killed returned no error")
	}
	waitPidExit(t, sh, 5*time.Second)
	waitPidExit(t, sleep, 5*time.Second)
	if processGone(x.st.Pid) {
		t.Errorf("the container's init was killed too")
	}
}

// childOfPid tells whether child's parent is pid.
func childOfPid(pid, child int) bool {
	return findProc(func(p, ppid int, _ []string) bool { return p == child && ppid == pid }) != 0
}

// errFull is what a capped writer says once it has its fill.
var errFull = errors.New("full")

type capped struct {
	buf   bytes.Buffer
	limit int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.limit - c.buf.Len(); len(p) > room {
		c.buf.Write(p[:room])
		return room, errFull
	}
	return c.buf.Write(p)
}

// An exec probe keeps 10 KiB of output: the rest is dropped, and the process
// does not block on a full pipe.
func TestExecOutputCaptureBounded(t *testing.T) {
	x := runningContainer(t, nil)
	out := &capped{limit: 10 << 10}
	var errOut bytes.Buffer
	code, err := x.rt.Exec(context.Background(), x.st.ID, podspec.ExecSpec{
		Cmd:    []string{"sh", "-c", "yes 0123456789 | head -c 1000000; echo done >&2"},
		Stdout: out, Stderr: &errOut, Timeout: 30 * time.Second,
	})
	if err != nil || code != 0 {
		t.Fatalf("Exec = %d, %v", code, err)
	}
	if out.buf.Len() != 10<<10 || !strings.HasPrefix(out.buf.String(), "0123456789\n0123") || errOut.String() != "done\n" {
		t.Errorf("kept %d bytes (%.20q...), stderr %q; want 10240 and done", out.buf.Len(), out.buf.String(), errOut.String())
	}
}

func TestExecErrors(t *testing.T) {
	x := runningContainer(t, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		cmd  []string
		want error
	}{
		{[]string{"no-such-command"}, podspec.ErrCommandNotFound},
		{[]string{"/no/such/file"}, podspec.ErrCommandNotFound},
		{[]string{"/tmp"}, podspec.ErrCommandNotExecutable},
	} {
		code, err := x.rt.Exec(ctx, x.st.ID, podspec.ExecSpec{Cmd: tc.cmd})
		if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.cmd[0]) {
			t.Errorf("Exec %q = %d, %v; want an error naming it, wrapping %v", tc.cmd, code, err, tc.want)
		}
	}
	if _, err := x.rt.Exec(ctx, "nosuchid", podspec.ExecSpec{Cmd: []string{"true"}}); !errors.Is(err, podspec.ErrNotExist) {
		t.Errorf("Exec in an unknown container = %v, want ErrNotExist", err)
	}
	done := x.start(x.pod, x.container(x.pod, "done", "true"))
	x.wait(done.ID)
	if _, err := x.rt.Exec(ctx, done.ID, podspec.ExecSpec{Cmd: []string{"true"}}); !errors.Is(err, podspec.ErrNotRunning) {
		t.Errorf("Exec in an exited container = %v, want ErrNotRunning", err)
	}
	x.destroy(done.ID)
}

func TestExecTTY(t *testing.T) {
	x := runningContainer(t, nil)
	code, out, errOut := x.run(t, podspec.ExecSpec{
		Cmd: []string{"sh", "-c", "tty; stty size; echo to-stderr >&2"}, TTY: true,
		Size: podspec.TermSize{Width: 100, Height: 30},
	})
	// A terminal turns \n into \r\n; stderr goes to it too.
	if code != 0 || !strings.HasPrefix(out, "/dev/pts/") || !strings.HasSuffix(out, "\r\n30 100\r\nto-stderr\r\n") || errOut != "" {
		t.Errorf("exit %d, terminal %q, stderr %q", code, out, errOut)
	}

	resize := make(chan podspec.TermSize, 1)
	lines := newLineWriter()
	stdinR, stdinW := io.Pipe()
	defer stdinW.Close()
	done := make(chan error, 1)
	go func() {
		_, err := x.rt.Exec(context.Background(), x.st.ID, podspec.ExecSpec{
			Cmd: []string{"sh", "-c", `trap 'stty size; exit 0' WINCH; echo ready; while :; do sleep 0.1; done`},
			TTY: true, Size: podspec.TermSize{Width: 80, Height: 24}, Resize: resize, Stdin: stdinR, Stdout: lines,
		})
		done <- err
	}()
	lines.await(t, "ready\r")
	resize <- podspec.TermSize{Width: 132, Height: 43}
	lines.await(t, "43 132\r")
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// lineWriter is a Stdout whose lines tests wait for.
type lineWriter struct {
	mu    sync.Mutex
	data  []byte
	wrote chan struct{} // receives after each write, never blocks the writer
}

func newLineWriter() *lineWriter { return &lineWriter{wrote: make(chan struct{}, 1)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.data = append(w.data, p...)
	w.mu.Unlock()
	select {
	case w.wrote <- struct{}{}:
	default:
	}
	return len(p), nil
}

// await waits until the output has line.
func (w *lineWriter) await(t *testing.T, line string) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		w.mu.Lock()
		has := strings.Contains("\n"+string(w.data), "\n"+line+"\n")
		got := string(w.data)
		w.mu.Unlock()
		if has {
			return
		}
		select {
		case <-w.wrote:
		case <-deadline:
			t.Fatalf("output %q never had line %q", got, line)
		}
	}
}

// waitNoneLeft waits until no process in x's container whose command line
// matches is alive (a zombie has exited).
func waitNoneLeft(t *testing.T, x *execEnv, match func(cmdline string) bool) {
	t.Helper()
	var procs string
	for _, line := range strings.Split(procInfo(t, x.st.Pid, "cgroup"), "\n") {
		f := strings.SplitN(line, ":", 3)
		if len(f) != 3 {
			continue
		}
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil && f[1] == "" {
			procs = filepath.Join("/sys/fs/cgroup", f[2], "cgroup.procs") // v2
		} else if f[1] == "pids" {
			procs = filepath.Join("/sys/fs/cgroup/pids", f[2], "cgroup.procs")
		}
	}
	var left []string
	poll(t, 10*time.Second, "exec processes still alive in the container", func() bool {
		left = nil
		b, err := os.ReadFile(procs)
		if err != nil {
			t.Fatal(err)
		}
		for _, pid := range strings.Fields(string(b)) {
			cmd, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			stat, _ := os.ReadFile("/proc/" + pid + "/stat")
			s := string(stat)
			if i := strings.LastIndexByte(s, ')'); i > 0 && strings.HasPrefix(s[i+1:], " Z") {
				continue
			}
			if c := strings.ReplaceAll(strings.TrimRight(string(cmd), "\x00"), "\x00", " "); match(c) {
				left = append(left, pid+" "+c)
			}
		}
		return len(left) == 0
	})
}

// childWith returns the pid of the exec process whose command line has arg:
// the child of an exec server that this process started, which is how an
// exec runs the monitor's program rather than this one (exec.Run).
func childWith(t *testing.T, arg string) int {
	t.Helper()
	var found int
	poll(t, 10*time.Second, "no exec process has "+arg, func() bool {
		found = findProc(func(pid int, ppid int, cmdline []string) bool {
			return strings.Contains(strings.Join(cmdline, " "), arg) && isExecServer(ppid)
		})
		return found != 0
	})
	return found
}

// isExecServer tells whether pid is an exec server that this process
// started: the monitor's program in its exec role, this process's child.
func isExecServer(pid int) bool {
	return findProc(func(p, ppid int, cmdline []string) bool {
		return p == pid && ppid == os.Getpid() && len(cmdline) > 1 && cmdline[0] == mon.Name && cmdline[1] == mon.ExecArg
	}) != 0
}

// childOf returns a child of pid.
func childOf(t *testing.T, parent int) int {
	t.Helper()
	var found int
	poll(t, 10*time.Second, fmt.Sprintf("process %d has no child", parent), func() bool {
		found = findProc(func(pid int, ppid int, _ []string) bool { return ppid == parent })
		return found != 0
	})
	return found
}

func findProc(match func(pid, ppid int, cmdline []string) bool) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(stat)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		cmd, _ := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if match(pid, ppid, strings.Split(strings.TrimRight(string(cmd), "\x00"), "\x00")) {
			return pid
		}
	}
	return 0
}

// procInfo is /proc/<pid>/<what>: a namespace link or the cgroup file.
func procInfo(t *testing.T, pid int, what string) string {
	t.Helper()
	p := "/proc/" + strconv.Itoa(pid) + "/" + what
	if strings.HasPrefix(what, "ns/") {
		l, err := os.Readlink(p)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A daemon that died mid-exec leaves the process running; the next one
// kills it, and what it started in the background.
func TestExecLeftoverKilledByNextDaemon(t *testing.T) {
	x := runningContainer(t, nil)
	marker := "exec-" + randHex(4)
	lines := newLineWriter()
	done := make(chan int, 1)
	go func() {
		code, _ := x.rt.Exec(context.Background(), x.st.ID, podspec.ExecSpec{
			Cmd: []string{"sh", "-c", "sleep 1000 & echo ready; wait", marker}, Stdout: lines,
		})
		done <- code
	}()
	lines.await(t, "ready")
	sh := childWith(t, marker)
	sleep := childOf(t, sh)
	x.newRuntime() // the next daemon
	waitPidExit(t, sleep, 5*time.Second)
	if code := <-done; code != 137 {
		t.Errorf("exec process exit %d, want 137 (SIGKILL)", code)
	}
	if processGone(x.st.Pid) {
		t.Errorf("the container's init was killed too")
	}
}

// An exec probe keeps stdout and stderr together, as the kubelet's
// CombinedOutput does: one writer for both gets them in order, one write at a
// time.
func TestExecCombinedOutput(t *testing.T) {
	x := runningContainer(t, nil)
	var both bytes.Buffer
	code, err := x.rt.Exec(context.Background(), x.st.ID, podspec.ExecSpec{
		Cmd:    []string{"sh", "-c", "for i in 1 2 3; do echo out$i; echo err$i >&2; done"},
		Stdout: &both, Stderr: &both,
	})
	if want := "out1\nerr1\nout2\nerr2\nout3\nerr3\n"; code != 0 || err != nil || both.String() != want {
		t.Errorf("Exec = %d, %v, output %q; want %q", code, err, both.String(), want)
	}
}

// One exec server runs the execs of every container: a hostile container's
// exec, running beside another container's, gets nothing of it nor of the
// server (no descriptor, no environment, no view of the server), and the
// server is one, long-lived, process.
func TestExecServerGivesAContainerNothingOfAnother(t *testing.T) {
	a := runningContainer(t, nil)
	e := a.env
	pod := e.pod(false)
	e.sandbox(pod)
	hostile := runningIn(t, e, pod, "hostile", nil)

	// A's exec runs on, with a secret in its environment and streams of
	// its own (the exit after cat keeps sh from exec'ing it, which would
	// take the marker off its command line).
	marker := "exec-" + randHex(4)
	lines := newLineWriter()
	stdin, feed := io.Pipe()
	defer feed.Close()
	done := make(chan error, 1)
	go func() {
		_, err := a.rt.Exec(context.Background(), a.st.ID, podspec.ExecSpec{
			Cmd: []string{"sh", "-c", "echo ready; cat; exit 0", marker}, Stdout: lines, Stdin: stdin,
			Env: []podspec.EnvVar{{Name: "A_SECRET", Value: "s3cret-" + marker}},
		})
		done <- err
	}()
	lines.await(t, "ready")
	sh := childWith(t, marker)

	_, out, _ := hostile.run(t, podspec.ExecSpec{Cmd: []string{"sh", "-c",
		`ls /proc/self/fd; echo ppid=$PPID; env; cat /proc/1/environ 2>/dev/null | tr '\0' '\n'; echo end`}})
	if fds := strings.Fields(out[:strings.Index(out, "ppid=")]); !slices.Equal(fds, []string{"0", "1", "2", "3"}) {
		t.Errorf("the hostile exec's descriptors (ls's own is 3): %q", fds)
	}
	if !strings.Contains(out, "ppid=0\n") {
		t.Errorf("the hostile exec sees its parent, the exec server, in its PID namespace: %q", out)
	}
	if strings.Contains(out, "s3cret") || strings.Contains(out, marker) {
		t.Errorf("the hostile exec sees the other container's exec: %q", out)
	}

	// A's process is the child of the server that ran the hostile exec
	// too: the one the runtime keeps.
	if server := findProc(func(pid, _ int, _ []string) bool { return isExecServer(pid) && childOfPid(pid, sh) }); server == 0 {
		t.Errorf("no exec server is the parent of %d", sh)
	} else if n := countProcs(func(pid int, cmdline []string) bool {
		return isExecServer(pid) && slices.Contains(cmdline, e.rt.libcontainerRoot())
	}); n != 1 {
		t.Errorf("%d exec servers run for this runtime, want the one", n)
	}
	feed.Close()
	if err := <-done; err != nil {
		t.Errorf("A's exec: %v", err)
	}
}

// countProcs counts the processes that match.
func countProcs(match func(pid int, cmdline []string) bool) int {
	n := 0
	findProc(func(pid, _ int, cmdline []string) bool {
		if match(pid, cmdline) {
			n++
		}
		return false
	})
	return n
}

// The exec server exits once no exec came for its idle time (a node without
// execs runs none), not while one runs, and the next exec starts another.
func TestExecServerExitsWhenIdle(t *testing.T) {
	x := runningContainer(t, nil)
	x.rt.execIdleForTest = time.Millisecond
	server := func() int {
		return findProc(func(pid, _ int, cmdline []string) bool {
			return isExecServer(pid) && slices.Contains(cmdline, x.rt.libcontainerRoot())
		})
	}
	stdin, feed := io.Pipe()
	lines := newLineWriter()
	done := make(chan error, 1)
	go func() {
		_, err := x.rt.Exec(context.Background(), x.st.ID, podspec.ExecSpec{Cmd: []string{"sh", "-c", "echo ready; read x"}, Stdout: lines, Stdin: stdin})
		done <- err
	}()
	lines.await(t, "ready")
	first := server()
	if first == 0 {
		t.Fatal("no exec server runs during an exec")
	}
	// Another exec comes and goes meanwhile: the server stays for the
	// first.
	x.run(t, podspec.ExecSpec{Cmd: []string{"true"}})
	if s := server(); s != first {
		t.Fatalf("exec server after a second exec: %d, want %d", s, first)
	}
	feed.Close()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitPidExit(t, first, 20*time.Second)

	x.run(t, podspec.ExecSpec{Cmd: []string{"true"}})
	poll(t, 20*time.Second, "the next exec's server never exited", func() bool { return server() == 0 })
}

// An exec without a daemon (the command line's) runs through an exec server
// of its own, which exits with it: it leaves no process and no record, also
// when its command outlives its timeout.
func TestExecRecordedLeavesNothing(t *testing.T) {
	x := runningContainer(t, nil)
	servers := func() int {
		return countProcs(func(pid int, cmdline []string) bool {
			return isExecServer(pid) && slices.Contains(cmdline, x.rt.libcontainerRoot())
		})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	if code, err := ExecRecorded(ctx, x.cfg.RunDir, x.st.ID, podspec.ExecSpec{Cmd: []string{"echo", "hi"}, Stdout: &out}, x.rt.log); err != nil || code != 0 || out.String() != "hi\n" {
		t.Errorf("ExecRecorded = %d, %v, stdout %q; want 0, hi", code, err, out.String())
	}
	poll(t, 20*time.Second, "the exec server of an exec without a daemon never exited", func() bool { return servers() == 0 })

	marker := "recorded-" + randHex(4)
	_, err := ExecRecorded(ctx, x.cfg.RunDir, x.st.ID, podspec.ExecSpec{Cmd: []string{"sh", "-c", "sleep 1000; exit 0", marker}, Timeout: time.Second}, x.rt.log)
	if !errors.Is(err, podspec.ErrExecTimeout) {
		t.Errorf("ExecRecorded of a command outliving its timeout = %v, want ErrExecTimeout", err)
	}
	poll(t, 20*time.Second, "the timed-out exec's process or server still ran", func() bool {
		return servers() == 0 && countProcs(func(_ int, cmdline []string) bool { return slices.Contains(cmdline, marker) }) == 0
	})
	if recs, _ := os.ReadDir(x.rt.containerDir(x.st.ID) + "/" + execsDir); len(recs) > 0 {
		t.Errorf("exec records left: %v", recs)
	}
}
