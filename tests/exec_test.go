package tests

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// execCmd is `staticpodd exec` with args (POD ... -- CMD...) for this daemon.
func execCmd(d *daemon, args ...string) *exec.Cmd {
	return exec.Command(testdaemon.Bin, append([]string{"exec", "--root-dir", d.RootDir, "--run-dir", d.RunDir}, args...)...)
}

// execOut runs `staticpodd exec` and returns its stdout, stderr and exit code.
func execOut(d *daemon, stdin string, args ...string) (string, string, int) {
	d.T.Helper()
	cmd := execCmd(d, args...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = strings.NewReader(stdin), &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		d.T.Fatal(err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// webWithSide is the pod web: its main container and side, which runs as
// uid 1000.
var webWithSide = sleeper("web", `  - name: side
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    securityContext: {runAsUser: 1000}
`)

func TestExec(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", webWithSide)
	d.WriteManifest("job.yaml", `apiVersion: v1
kind: Pod
metadata: {name: job}
spec:
  restartPolicy: Never
  containers:
  - {name: main, image: busybox, command: ["true"]}
`)
	pod := d.WaitRunning("web", 30*time.Second)

	out, errOut, code := execOut(d, "", "web", "--", "sh", "-c", "echo $HOSTNAME; exit 3")
	if out != pod.Name+"\n" || code != 3 {
		t.Errorf("exec of echo $HOSTNAME; exit 3: stdout %q, exit %d; want %q and 3", out, code, pod.Name+"\n")
	}
	if want := `Defaulted container "main" out of: main, side` + "\n"; errOut != want {
		t.Errorf("stderr %q, want kubectl's note %q", errOut, want)
	}
	if out, _, code := execOut(d, "", "web", "-c", "side", "--", "id", "-u"); out != "1000\n" || code != 0 {
		t.Errorf("exec id -u in side: %q, exit %d; want the container's uid 1000", out, code)
	}
	if out, _, code := execOut(d, "piped\ninput", "-i", "web", "-c", "main", "--", "cat"); out != "piped\ninput" || code != 0 {
		t.Errorf("exec -i cat: %q, exit %d; want its input back", out, code)
	}
	for _, tc := range []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"web", "-c", "main", "--", "no-such-command"}, 127, "command not found"},
		{[]string{"web", "-c", "main", "--", "/etc"}, 126, "command cannot be executed"},
		{[]string{"web", "-c", "nope", "--", "true"}, 1, `pod web-` + d.Name + ` has no container "nope"; it has main, side`},
		{[]string{"nope", "--", "true"}, 1, `no pod "nope"`},
	} {
		if _, errOut, code := execOut(d, "", tc.args...); code != tc.code || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("exec %q: exit %d, stderr %q; want %d and %q", tc.args, code, errOut, tc.code, tc.stderr)
		}
	}
	d.Eventually(30*time.Second, "job completed", func() error {
		p := d.Pod("job")
		if p == nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil {
			return errStill
		}
		return nil
	})
	want := `container "main" of pod default/job-` + d.Name + ` is not running: it is terminated (Completed, exit code 0)`
	if _, errOut, code := execOut(d, "", "job", "--", "true"); code != 1 || !strings.Contains(errOut, want) {
		t.Errorf("exec in a completed container: exit %d, stderr %q; want 1 and %q", code, errOut, want)
	}
}

// TestExecTTY drives `staticpodd exec -i -t` from a real terminal: the
// command gets a terminal of its own, the size of the local one, and follows
// its resizes.
func TestExecTTY(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", sleeper("web", ""))
	d.WaitRunning("web", 30*time.Second)

	term, _, exited := startExecTTY(t, d, 100, 30)

	// '' keeps the shell's echo of what is typed from looking like the answer.
	out := term.run(t, "tty; stty size; echo $TERM; echo do''ne", "done")
	if !strings.Contains(out, "\r\n/dev/pts/") || !strings.Contains(out, "\r\n30 100\r\nvt100\r\n") {
		t.Errorf("tty; stty size; echo $TERM printed %q, want a /dev/pts terminal of 30 rows, 100 columns, TERM=vt100", out)
	}

	term.resize(t, 132, 43)
	// The resize goes apart from the input: ask until the new size shows.
	for i := 0; ; i++ {
		out := term.run(t, fmt.Sprintf("stty size; echo do''ne%d", i), "done"+strconv.Itoa(i))
		if strings.Contains(out, "\r\n43 132\r\n") {
			break
		}
		if i == 50 {
			t.Fatalf("stty size still says %q after the terminal was resized to 43x132", out)
		}
	}

	term.write(t, "exit 5\n")
	err := <-exited
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 5 {
		t.Errorf("staticpodd exec -it ended with %v, want exit status 5 from the shell", err)
	}
}

// TestExecDaemonDies: a daemon killed mid-exec leaves the command running
// (it uses neither its input nor its output); the next daemon kills it, and
// leaves the container alone.
func TestExecDaemonDies(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", sleeper("web", ""))
	pod := d.WaitRunning("web", 30*time.Second)
	initPID := containerPID(d, pod, "main")
	marker := "99" + strconv.Itoa(int(time.Now().UnixNano()%1000000))

	cli := execCmd(d, "web", "--", "sleep", marker)
	var cliErr bytes.Buffer
	cli.Stderr = &cliErr
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	var sleepPID int
	d.Eventually(10*time.Second, "the exec'd sleep runs", func() error {
		if sleepPID = findCmdline("sleep\x00" + marker); sleepPID == 0 {
			return errStill
		}
		return nil
	})
	d.Kill9()
	if err := cli.Wait(); err == nil || !strings.Contains(cliErr.String(), "connection to the daemon lost") {
		t.Errorf("staticpodd exec ended with %v, stderr %q; want a failure naming the lost connection", err, cliErr.String())
	}
	if !procAlive(sleepPID) {
		t.Fatalf("exec'd process %d died with the daemon; the docs say it outlives it", sleepPID)
	}
	d.Start()
	d.Eventually(10*time.Second, "the next daemon kills the exec'd process", func() error {
		if procAlive(sleepPID) {
			return errStill
		}
		return nil
	})
	if !procAlive(initPID) {
		t.Errorf("the container's init %d died too", initPID)
	}
}

// TestExecRunsTheMonitorProgram checks who runs an exec: the process is the
// child of an exec server that runs the monitor's own program (the very
// memfd the container's monitor runs from), so that libcontainer's setns
// init, which re-executes the program of the process that starts it, is
// that small program and not the daemon's binary; and the next exec is the
// same server's, which paid for no start of its own.
func TestExecRunsTheMonitorProgram(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", sleeper("web", ""))
	pod := d.WaitRunning("web", 30*time.Second)
	monitorPID := ppid(containerPID(d, pod, "main"))
	marker := "98" + strconv.Itoa(int(time.Now().UnixNano()%1000000))

	cli := execCmd(d, "web", "--", "sleep", marker)
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	var sleepPID int
	d.Eventually(10*time.Second, "the exec'd sleep runs", func() error {
		if sleepPID = findCmdline("sleep\x00" + marker); sleepPID == 0 {
			return errStill
		}
		return nil
	})
	server := ppid(sleepPID)
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", server))
	if args := strings.Split(string(cmdline), "\x00"); len(args) < 2 || args[0] != "staticpodd-monitor" || args[1] != "__staticpodd_exec" {
		t.Errorf("the exec'd process's parent %d runs %q; want the exec server, staticpodd-monitor __staticpodd_exec", server, args)
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", server))
	if !strings.HasPrefix(exe, "/memfd:") || !strings.Contains(exe, "staticpodd-monitor") {
		t.Errorf("the exec server runs %q; want the monitor's program in its memfd", exe)
	}
	ours, err1 := os.Stat(fmt.Sprintf("/proc/%d/exe", server))
	theirs, err2 := os.Stat(fmt.Sprintf("/proc/%d/exe", monitorPID))
	if err1 != nil || err2 != nil || !os.SameFile(ours, theirs) {
		t.Errorf("the exec server's program is not the container's monitor's (%v, %v)", err1, err2)
	}
	if err := syscall.Kill(sleepPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := cli.Wait(); cli.ProcessState.ExitCode() != 137 {
		t.Errorf("staticpodd exec of the killed sleep: %v; want exit 137", err)
	}

	marker += "1"
	cli = execCmd(d, "web", "--", "sleep", marker)
	if err := cli.Start(); err != nil {
		t.Fatal(err)
	}
	d.Eventually(10*time.Second, "the second exec'd sleep runs", func() error {
		if sleepPID = findCmdline("sleep\x00" + marker); sleepPID == 0 {
			return errStill
		}
		return nil
	})
	if p := ppid(sleepPID); p != server {
		t.Errorf("the second exec's parent is %d, not the exec server %d of the first", p, server)
	}
	if err := syscall.Kill(sleepPID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cli.Wait()
}

// findCmdline returns a process whose command line is cmdline (arguments
// separated by NULs), or 0.
func findCmdline(cmdline string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && strings.TrimRight(string(b), "\x00") == cmdline {
			return pid
		}
	}
	return 0
}

// pty is a terminal the test types into.
type pty struct {
	master, slave *os.File

	mu   sync.Mutex
	out  []byte
	more chan struct{} // receives when out grew, never blocks the reader
}

// startExecTTY starts `staticpodd exec -i -t web -- sh` on a new terminal of
// width x height, as a login would: the terminal is its controlling one,
// TERM=vt100. exited gets what Wait returns; the command is killed at the
// test's end if it still runs.
func startExecTTY(t *testing.T, d *testdaemon.Daemon, width, height uint16) (*pty, *exec.Cmd, <-chan error) {
	t.Helper()
	return startTTY(t, execCmd(d, "-i", "-t", "web", "--", "sh"), width, height)
}

// startTTY starts cmd as startExecTTY starts exec.
func startTTY(t *testing.T, cmd *exec.Cmd, width, height uint16) (*pty, *exec.Cmd, <-chan error) {
	t.Helper()
	term := openPty(t, width, height)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = term.slave, term.slave, term.slave
	cmd.Env = append(os.Environ(), "TERM=vt100")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	term.slave.Close()
	exited := make(chan error, 1)
	done := make(chan struct{})
	go func() {
		err := cmd.Wait()
		close(done)
		exited <- err
	}()
	t.Cleanup(func() {
		select {
		case <-done:
		default:
			cmd.Process.Kill()
			<-done
		}
	})
	return term, cmd, exited
}

// openPty opens a new terminal of width x height.
func openPty(t *testing.T, width, height uint16) *pty {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { master.Close() })
	fd := int(master.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	slave, err := os.OpenFile("/dev/pts/"+strconv.Itoa(n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := &pty{master: master, slave: slave, more: make(chan struct{}, 1)}
	p.resize(t, width, height)
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := master.Read(buf)
			p.mu.Lock()
			p.out = append(p.out, buf[:n]...)
			p.mu.Unlock()
			select {
			case p.more <- struct{}{}:
			default:
			}
			if err != nil {
				return
			}
		}
	}()
	return p
}

func (p *pty) resize(t *testing.T, width, height uint16) {
	t.Helper()
	if err := unix.IoctlSetWinsize(int(p.master.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Col: width, Row: height}); err != nil {
		t.Fatal(err)
	}
}

func (p *pty) write(t *testing.T, s string) {
	t.Helper()
	if _, err := p.master.WriteString(s); err != nil {
		t.Fatal(err)
	}
}

// run types line and returns what the terminal shows from then until a line
// that is until and the shell's next prompt after it. Waiting for the prompt
// matters to what is typed next: busybox sh puts the terminal back in raw
// mode before it prints its prompt, and a Ctrl-D that reaches a terminal
// still in canonical mode is kept as an end-of-line marker, which raw mode
// then reads as a NUL (shown as ^@) instead of ending the shell. A person
// types after the prompt; so does this.
func (p *pty) run(t *testing.T, line, until string) string {
	t.Helper()
	p.mu.Lock()
	from := len(p.out)
	p.mu.Unlock()
	p.write(t, line+"\n")
	deadline := time.After(20 * time.Second)
	for {
		p.mu.Lock()
		got := string(p.out[from:])
		p.mu.Unlock()
		// The prompt is "/ # ", and then busybox asks where the cursor is
		// (ESC [6n), with no answer needed.
		if i := strings.Index(got, "\r\n"+until+"\r\n"); i >= 0 && strings.Contains(got[i:], "# ") {
			return got
		}
		select {
		case <-p.more:
		case <-deadline:
			t.Fatalf("typed %q; the terminal never showed %q, only %q", line, until, got)
		}
	}
}
