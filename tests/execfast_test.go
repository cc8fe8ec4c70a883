package tests

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// An exec run both ways: by the quick exec (the C constructor, before Go
// starts) and by the Go exec (--test-exec-in-go, a flag the quick exec does
// not take). GODEBUG=inittrace=1 makes a Go runtime that starts say so on
// stderr, one "init " line a package: the quick exec's output has none.
type execRun struct {
	stdout, stderr string
	code           int
	goStarted      bool
}

// runExecWay runs `staticpodd exec` with env and args (after "exec"), in Go
// or not, on stdin (nil: none), and returns what it printed, its exit code
// and whether Go started.
func runExecWay(t *testing.T, inGo bool, env []string, stdin io.Reader, args ...string) execRun {
	t.Helper()
	a := []string{"exec"}
	if inGo {
		a = append(a, "--test-exec-in-go")
	}
	cmd := exec.Command(testdaemon.Bin, append(a, args...)...)
	cmd.Env = append(append(os.Environ(), "GODEBUG=inittrace=1"), env...)
	cmd.Stdin = stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if exit := (*exec.ExitError)(nil); err != nil && !errors.As(err, &exit) {
		t.Fatal(err)
	}
	return splitInitTrace(out.String(), errOut.String(), cmd.ProcessState.ExitCode())
}

// splitInitTrace takes the Go runtime's init lines out of stderr.
func splitInitTrace(stdout, stderr string, code int) execRun {
	r := execRun{stdout: stdout, code: code}
	var rest strings.Builder
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if strings.HasPrefix(line, "init ") && strings.Contains(line, " ms clock, ") {
			r.goStarted = true
			continue
		}
		rest.WriteString(line)
	}
	r.stderr = rest.String()
	return r
}

// compareWays runs args both ways and fails unless they print the same and
// exit alike, and the quick exec served (or left it to Go) as quick says.
func compareWays(t *testing.T, env []string, quick bool, args ...string) execRun {
	t.Helper()
	fast := runExecWay(t, false, env, nil, args...)
	slow := runExecWay(t, true, env, nil, args...)
	if !slow.goStarted {
		t.Fatalf("exec %q in Go: no init lines on stderr; GODEBUG=inittrace=1 did not show Go starting", args)
	}
	if fast.goStarted == quick {
		t.Errorf("exec %q: the Go runtime started: %v; want the quick exec to serve it: %v", args, fast.goStarted, quick)
	}
	if fast.stdout != slow.stdout || fast.stderr != slow.stderr || fast.code != slow.code {
		t.Errorf("exec %q:\nquick: exit %d, stdout %q, stderr %q\nGo:    exit %d, stdout %q, stderr %q",
			args, fast.code, trim(fast.stdout), fast.stderr, slow.code, trim(slow.stdout), slow.stderr)
	}
	return fast
}

func trim(s string) string {
	if len(s) > 200 {
		return s[:200] + "..."
	}
	return s
}

// TestQuickExecAgreesWithGo runs the execs of TestExec and more both ways
// against a real daemon: the same output, errors and exit codes, the quick
// exec serving every one it takes and leaving the rest to Go.
func TestQuickExecAgreesWithGo(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", webWithSide)
	pod := d.WaitRunning("web", 30*time.Second)
	dirs := []string{"--root-dir", d.RootDir, "--run-dir", d.RunDir}
	hostile := "\x1b]0;owned\x07\xff\xc2\x85\u202e-\u00a0x"
	for _, tc := range []struct {
		args  []string
		quick bool
		code  int
	}{
		{[]string{"web", "--", "sh", "-c", "echo $HOSTNAME; echo to stderr >&2; exit 3"}, true, 3},
		{[]string{"web", "-c", "side", "--", "id", "-u"}, true, 0},
		{[]string{"--container=side", "--namespace=default", "web", "--", "id", "-u"}, true, 0},
		{[]string{"-n", "default", "web", "-c", "main", "--", "sh", "-c", "seq 1 200000; printf 'x\\000y\\377'"}, true, 0},
		{[]string{"web", "-c", "main", "--", "sh", "-c", "kill -9 $$"}, true, 137},
		{[]string{"web", "-c", "main", "--", "sh", "-c", "exit 255"}, true, 255},
		{[]string{"web", "-c", "main", "--", "no-such-command"}, true, 127},
		{[]string{"web", "-c", "main", "--", "/etc"}, true, 126},
		{[]string{"web", "-c", "main", "--", hostile}, true, 127},
		{[]string{"web", "-c", "main", "--", "echo", "a b&c=d?e%f+g", "", "\n"}, true, 0},
		// Refused: said as Go says it.
		{[]string{"web", "-c", "nope", "--", "true"}, true, 1},
		{[]string{"nope", "--", "true"}, true, 1},
		{[]string{"web", "-n", "elsewhere", "--", "true"}, true, 1},
		// Shapes the quick exec does not take.
		{[]string{"-i", "web", "--", "true"}, false, 0},
		{[]string{"-cmain", "web", "--", "true"}, false, 0},
		{[]string{"web", "extra", "--", "true"}, false, 1},
		{[]string{"web", "--"}, false, 1},
	} {
		r := compareWays(t, nil, tc.quick, append(append([]string{}, dirs...), tc.args...)...)
		if r.code != tc.code {
			t.Errorf("exec %q: exit %d, want %d (stderr %q)", tc.args, r.code, tc.code, r.stderr)
		}
	}
	// The run dir from the environment, as a default run dir would be.
	r := compareWays(t, []string{"STATICPODD_RUN_DIR=" + d.RunDir}, true, "web", "--", "sh", "-c", "echo $HOSTNAME")
	if r.stdout != pod.Name+"\n" || r.stderr != `Defaulted container "main" out of: main, side`+"\n" {
		t.Errorf("exec with STATICPODD_RUN_DIR: stdout %q, stderr %q; want the pod's name and kubectl's note", r.stdout, r.stderr)
	}
	// The hostile command's name comes back in the error, escaped.
	r = runExecWay(t, false, nil, nil, append(dirs, "web", "-c", "main", "--", hostile)...)
	if strings.ContainsAny(r.stderr, "\x1b\x07\u0085") || !strings.Contains(r.stderr, `\x1b]0;owned\a`) {
		t.Errorf("exec of a hostile command name: stderr %q, want its control characters escaped", r.stderr)
	}
	// With no daemon at the run dir, Go answers from the records.
	empty := t.TempDir()
	compareWays(t, nil, false, "--root-dir", d.RootDir, "--run-dir", empty, "web", "--", "true")
}

// fakeExecDaemon serves each connection on <dir>/staticpodd.sock with
// answer, after reading the request's header; got receives each request's
// first line once it is read.
func fakeExecDaemon(t *testing.T, answer func(net.Conn)) (dir string, got chan string) {
	t.Helper()
	dir = t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, "staticpodd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	got = make(chan string, 16)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				first, _ := br.ReadString('\n')
				for {
					line, err := br.ReadString('\n')
					if err != nil || line == "\r\n" {
						break
					}
				}
				got <- strings.TrimSpace(first)
				answer(conn)
			}()
		}
	}()
	return dir, got
}

func frame(stream byte, p string) []byte {
	b := []byte{stream, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[1:], uint32(len(p)))
	return append(b, p...)
}

const answer101 = "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: staticpodd-exec.v1\r\n"

// TestQuickExecAgainstAHostileDaemon gives both ways the same answers a
// broken or hostile daemon could give: each says the same and exits alike,
// and a frame's length does not make the quick exec allocate it.
func TestQuickExecAgainstAHostileDaemon(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		answer string
		code   int
		stderr string
	}{
		{"a frame too long", answer101 + "\r\n" + string(frame(1, "ok\n")) + "\x01\x80\x00\x00\x00", 1,
			"staticpodd: connection to the daemon lost before the command's exit status came: exec frame too long: 2147483648 bytes\n"},
		{"no status", answer101 + "\r\n" + string(frame(2, "partial")), 1,
			"partialstaticpodd: connection to the daemon lost before the command's exit status came: EOF\n"},
		{"half a header", answer101 + "\r\n\x01\x00", 1,
			"staticpodd: connection to the daemon lost before the command's exit status came: unexpected EOF\n"},
		{"half a frame", answer101 + "\r\n\x01\x00\x00\x00\x09abc", 1,
			"staticpodd: connection to the daemon lost before the command's exit status came: read exec frame: unexpected EOF\n"},
		{"a note with controls", answer101 + "Staticpodd-Note: \t note \xc2\x9b31m \xff end \t\r\n\r\n" + string(frame(3, `{"exitCode":0}`)), 0,
			"note \\u009b31m \ufffd end\n"},
		{"a status of other case and fields", answer101 + "\r\n" + string(frame(4, "ignored")) +
			string(frame(3, ` {"other":true, "EXITCODE": 300, "Error": "bad\u001b\u0085\ud800x\n\tz\ufffd", "z":null} `)), 1,
			"staticpodd: bad\\x1b\\u0085\ufffdx\n\tz\ufffd\n"},
		{"an error and exit 0", answer101 + "\r\n" + string(frame(3, `{"exitCode":0,"error":"odd"}`)), 1,
			"staticpodd: odd\n"},
		{"a negative code", answer101 + "\r\n" + string(frame(3, `{"exitCode":-5}`)), 1, ""},
		{"a field of a newer daemon", answer101 + "\r\n" + string(frame(3, `{"exitCode":2,"more":{"a":[1,{"b":null},"]}"],"c":-1.5e3}}`)), 2, ""},
		{"a null status", answer101 + "\r\n" + string(frame(3, ` null `)), 0, ""},
		{"keys with a NUL", answer101 + "\r\n" + string(frame(3, `{"exitCode\u0000":5,"error\u0000x":"boom"}`)), 0, ""},
		{"no reason phrase", "HTTP/1.1 101\r\n\r\n" + string(frame(3, `{"exitCode":4}`)), 4, ""},
		{"lines ending in LF", "HTTP/1.1 101 Switching Protocols\nConnection: Upgrade\nStaticpodd-Note:  hi\n\n" + string(frame(3, `{"exitCode":0}`)), 0, "hi\n"},
		{"a header line without a colon", answer101 + "Bad header\r\n\r\n" + string(frame(3, `{"exitCode":0}`)), 1,
			"staticpodd: read exec answer: malformed MIME header: missing colon: \"Bad header\"\n"},
		{"a 101 cut short", "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\n", 1, "staticpodd: read exec answer: unexpected EOF\n"},
		{"a 101 line cut by the end", "HTTP/1.1 101", 1, "staticpodd: read exec answer: unexpected EOF\n"},
		{"spaces before the code", "HTTP/1.1   101 Switching Protocols\r\n\r\n" + string(frame(3, `{"exitCode":0}`)), 0, ""},
		{"another HTTP version", "HTTP/1.2 101 Switching Protocols\r\n\r\n" + string(frame(3, `{"exitCode":0}`)), 0, ""},
		{"a note continued", answer101 + "Staticpodd-Note: Defaulted container \r\n \t \"main\" out of:\r\n\tmain, side\r\n\r\n" + string(frame(3, `{"exitCode":0}`)), 0,
			"Defaulted container \"main\" out of: main, side\n"},
		{"a space before a colon", answer101 + "X-Extra : 1\r\n\r\n" + string(frame(3, `{"exitCode":0}`)), 0, ""},
		{"an empty key", answer101 + ": 1\r\n\r\n" + string(frame(3, `{"exitCode":0}`)), 1,
			"staticpodd: read exec answer: malformed MIME header line: \": 1\"\n"},
		{"a right-to-left override in a bad line", answer101 + "Bad\u202eline\r\n\r\n", 1,
			"staticpodd: read exec answer: malformed MIME header: missing colon: \"Bad\\u202eline\"\n"},
		{"a refusal", "HTTP/1.1 409 Conflict\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 25\r\n\r\n \u00a0not running\x1b[31m, no\n\n", 1,
			"staticpodd: not running\\x1b[31m, no\n"},
		{"a refusal to the end", "HTTP/1.1 404 Not Found\r\n\r\n" + strings.Repeat("long ", 1000), 1,
			"staticpodd: " + strings.TrimSpace(strings.Repeat("long ", 1000)[:4096]) + "\n"},
		{"a 101 with a transfer encoding", answer101 + "Transfer-Encoding: gzip\r\n\r\n" + string(frame(3, `{"exitCode":0}`)), 1,
			"staticpodd: read exec answer: unsupported transfer encoding: \"gzip\"\n"},
		{"a 101 with a bad length", answer101 + "Content-Length: x\r\n\r\n" + string(frame(3, `{"exitCode":0}`)), 1,
			"staticpodd: read exec answer: bad Content-Length \"x\"\n"},
		{"two lengths", answer101 + "Content-Length: 1\r\nContent-Length: 2\r\n\r\n" + string(frame(3, `{"exitCode":0}`)), 1,
			"staticpodd: read exec answer: http: message cannot contain multiple Content-Length headers; got [\"1\" \"2\"]\n"},
		{"a length past int64", "HTTP/1.1 409 Conflict\r\nContent-Length: 9223372036854775808\r\n\r\nno way!", 1,
			"staticpodd: read exec answer: bad Content-Length \"9223372036854775808\"\n"},
		{"a 204 with a body", "HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\nhello", 1, ""},
		{"a status line ending in CR", "HTTP/1.1 101\r", 1, "staticpodd: read exec answer: malformed HTTP status code \"101\\r\"\n"},
		{"not HTTP", "SSH-2.0-OpenSSH_9.2\r\n", 1, "staticpodd: read exec answer: malformed HTTP response \"SSH-2.0-OpenSSH_9.2\"\n"},
		{"a refusal with a bad line", "HTTP/1.1 409 Conflict\r\nBad\r\n\r\n", 1, "staticpodd: read exec answer: malformed MIME header: missing colon: \"Bad\"\n"},
		{"many transfer encodings", "HTTP/1.1 101 X\r\n" + strings.Repeat("Transfer-Encoding: chunked\r\n", 17) + "\r\n" + string(frame(3, `{"exitCode":3}`)), 1,
			"staticpodd: read exec answer: too many transfer encodings: [" + strings.TrimSpace(strings.Repeat(`"chunked" `, 17)) + "]\n"},
		{"a trailer naming a length", answer101 + "Transfer-Encoding: chunked\r\nTrailer: X-A, content-length\r\n\r\n" + string(frame(3, `{"exitCode":3}`)), 1,
			"staticpodd: read exec answer: bad trailer key \"Content-Length\"\n"},
		{"HTTP/0.0", "HTTP/0.0 101 X\r\nTransfer-Encoding: gzip\r\n\r\n" + string(frame(3, `{"exitCode":3}`)), 1,
			"staticpodd: read exec answer: unsupported transfer encoding: \"gzip\"\n"},
		{"a bad line, then the end", "HTTP/1.1 101 X\r\nbad\r\n", 1, "staticpodd: read exec answer: malformed MIME header: missing colon: \"bad\"\n"},
		{"a code of -00", "HTTP/1.1 -00 X\r\nContent-Length: 3\r\n\r\nabc", 1, "staticpodd: abc\n"},
		{"a status nested as deep as it may be", answer101 + "\r\n" + string(frame(3, `{"exitCode":6,"x":`+strings.Repeat("[", 9999)+strings.Repeat("]", 9999)+`}`)), 6, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, got := fakeExecDaemon(t, func(c net.Conn) { io.WriteString(c, tc.answer) })
			r := compareWays(t, nil, true, "--run-dir", dir, "web", "--", "a b", "c")
			if r.code != tc.code || r.stderr != tc.stderr {
				t.Errorf("exit %d, stderr %q; want %d and %q", r.code, r.stderr, tc.code, tc.stderr)
			}
			for range 2 {
				if line := <-got; line != "POST /exec?command=a+b&command=c&pod=web HTTP/1.1" {
					t.Errorf("request %q", line)
				}
			}
			// Each request was taken before its answer went: a third,
			// the quick exec leaving a 101 to Go, would be here.
			select {
			case line := <-got:
				t.Errorf("a third request %q: an exec the daemon answered 101 was asked again", line)
			default:
			}
		})
	}
}

// TestQuickExecInterrupted: SIGINT, SIGTERM or SIGHUP before the daemon's
// answer, or while the command runs, ends the exec with status 130 and
// closes the connection (which kills the command), both ways alike.
func TestQuickExecInterrupted(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP} {
		for _, answered := range []bool{false, true} {
			for _, inGo := range []bool{false, true} {
				closed := make(chan struct{})
				dir, got := fakeExecDaemon(t, func(c net.Conn) {
					if answered {
						io.WriteString(c, answer101+"\r\n"+string(frame(1, "started\n")))
					}
					c.Read(make([]byte, 1)) // until the client leaves
					close(closed)
				})
				cmd := execAt(inGo, dir, "sleep", "1000")
				cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
				out, _ := cmd.StdoutPipe()
				var errOut bytes.Buffer
				cmd.Stderr = &errOut
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				<-got // the request has come: the exec waits for the answer
				if answered {
					line, _ := bufio.NewReader(out).ReadString('\n')
					if line != "started\n" {
						t.Fatalf("stdout %q", line)
					}
				}
				cmd.Process.Signal(sig)
				cmd.Wait()
				<-closed
				r := splitInitTrace("", errOut.String(), cmd.ProcessState.ExitCode())
				want := "staticpodd: interrupted before the daemon answered\n"
				if answered {
					want = "staticpodd: interrupted; the command was killed\n"
				}
				if r.code != 130 || r.stderr != want || r.goStarted != inGo {
					t.Errorf("%v, answered %v, in Go %v: exit %d, stderr %q, Go started %v; want 130 and %q",
						sig, answered, inGo, r.code, r.stderr, r.goStarted, want)
				}
			}
		}
	}
}

// TestQuickExecAnswerTimeout: a daemon that takes the request and never
// answers, or answers in part, is given up on after 10 s, what came read
// first, both ways alike.
func TestQuickExecAnswerTimeout(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ answer, stderr string }{
		{"", "staticpodd: the daemon did not answer the exec within 10s\n"},
		{"HTTP/1.1 101 X\r\nConnection: Upgrade\r\n", "staticpodd: the daemon did not answer the exec within 10s\n"},
		{"SSH-2.0-OpenSSH_9.2", "staticpodd: read exec answer: malformed HTTP response \"SSH-2.0-OpenSSH_9.2\"\n"},
		{"HTTP/1.1 101 X\r\nbad", "staticpodd: read exec answer: malformed MIME header: missing colon: \"bad\"\n"},
	} {
		t.Run(tc.answer, func(t *testing.T) {
			t.Parallel()
			dir, _ := fakeExecDaemon(t, func(c net.Conn) {
				io.WriteString(c, tc.answer)
				c.Read(make([]byte, 1))
			})
			r := compareWays(t, nil, true, "--run-dir", dir, "web", "--", "true")
			if r.code != 1 || r.stderr != tc.stderr {
				t.Errorf("exit %d, stderr %q; want 1 and %q", r.code, r.stderr, tc.stderr)
			}
		})
	}
}

// TestQuickExecSignalsThatEndIt: 34, which the Go runtime leaves to its
// default action, ends the exec both ways alike. (32, the C library's own,
// comes blocked to a child of some parents, make among them: not a signal
// to test with.)
func TestQuickExecSignalsThatEndIt(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{34} {
		for _, inGo := range []bool{false, true} {
			dir, got := fakeExecDaemon(t, func(c net.Conn) {
				io.WriteString(c, answer101+"\r\n")
				c.Read(make([]byte, 1))
			})
			cmd := execAt(inGo, dir, "true")
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			<-got
			cmd.Process.Signal(sig)
			waitBounded(t, cmd)
			if ws := cmd.ProcessState.Sys().(syscall.WaitStatus); !ws.Signaled() || ws.Signal() != sig {
				t.Errorf("signal %d, in Go %v: %v; want it ended by the signal", sig, inGo, cmd.ProcessState)
			}
		}
	}
}

// execAt is `staticpodd exec` (in Go or not) of command in the pod web of
// the daemon at the run dir dir.
func execAt(inGo bool, dir string, command ...string) *exec.Cmd {
	a := []string{"exec", "--run-dir", dir}
	if inGo {
		a = append(a, "--test-exec-in-go")
	}
	return exec.Command(testdaemon.Bin, append(append(a, "web", "--"), command...)...)
}

// runExecShell runs `staticpodd exec` (in Go or not) with args through sh,
// its fds changed by redir (">&-") after setup (shell commands run first,
// as a trap), and returns what it printed and how it ended.
func runExecShell(t *testing.T, inGo bool, setup, redir string, stdout io.Writer, args ...string) (execRun, *os.ProcessState) {
	t.Helper()
	a := []string{"-c", setup + ` exec "$0" "$@" ` + redir, testdaemon.Bin, "exec"}
	if inGo {
		a = append(a, "--test-exec-in-go")
	}
	cmd := exec.Command("sh", append(a, args...)...)
	cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitBounded(t, cmd)
	return splitInitTrace(out.String(), errOut.String(), cmd.ProcessState.ExitCode()), cmd.ProcessState
}

// waitBounded waits for cmd, and kills it, failing the test, if it has not
// ended 30 s on: only a bound for the failure, the pass waits on the exit.
func waitBounded(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	timer := time.AfterFunc(30*time.Second, func() { cmd.Process.Kill() })
	cmd.Wait()
	if !timer.Stop() {
		t.Errorf("%q had not ended 30 s on; killed", cmd.Args)
	}
}

// TestQuickExecWithAStreamClosed: with stdin, stdout or stderr closed, the
// connection must not take its number (the daemon would read the output as
// frames, and the note and errors would go to it): the quick exec leaves
// such an exec to Go, whose runtime opens /dev/null there first.
func TestQuickExecWithAStreamClosed(t *testing.T) {
	t.Parallel()
	dir, got := fakeExecDaemon(t, func(c net.Conn) {
		io.WriteString(c, answer101+"Staticpodd-Note: note\r\n\r\n"+string(frame(1, "out\n"))+string(frame(2, "err\n"))+string(frame(3, `{"exitCode":3}`)))
	})
	for _, redir := range []string{">&-", "2>&-", "<&-"} {
		var ways [2]execRun
		for i, inGo := range []bool{false, true} {
			ways[i], _ = runExecShell(t, inGo, "", redir, nil, "--run-dir", dir, "web", "--", "x")
			<-got
		}
		// With stderr closed, Go's init lines go nowhere: that the quick
		// exec left it to Go shows only in the output.
		if (!ways[0].goStarted && redir != "2>&-") || ways[0].stdout != ways[1].stdout || ways[0].stderr != ways[1].stderr || ways[0].code != 3 || ways[1].code != 3 {
			t.Errorf("%s: quick %+v, Go %+v; want both the same, exit 3, the quick exec leaving it to Go", redir, ways[0], ways[1])
		}
	}
}

// streamingDaemon answers 101 and sends output until the client leaves,
// which it then says on left.
func streamingDaemon(t *testing.T) (dir string, got chan string, left chan struct{}) {
	left = make(chan struct{}, 4)
	dir, got = fakeExecDaemon(t, func(c net.Conn) {
		if _, err := io.WriteString(c, answer101+"\r\n"); err == nil {
			f := frame(1, strings.Repeat("y\n", 16<<10))
			for {
				if _, err := c.Write(f); err != nil {
					break
				}
			}
		}
		left <- struct{}{}
	})
	return dir, got, left
}

// TestQuickExecInterruptedWhileItsOutputWaits: an interrupt while the
// output is not read (a pager, a slow terminal) closes the connection at
// once, so that the daemon kills the command, and the exec ends with 130
// once its output is taken; both ways.
func TestQuickExecInterruptedWhileItsOutputWaits(t *testing.T) {
	t.Parallel()
	for _, inGo := range []bool{false, true} {
		dir, _, left := streamingDaemon(t)
		cmd := execAt(inGo, dir, "yes")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		var errOut bytes.Buffer
		cmd.Stderr = &errOut
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(out, make([]byte, 4096)); err != nil {
			t.Fatal(err)
		}
		// The output is not read any further: the pipe fills, and the exec
		// waits to write it.
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-left:
		case <-time.After(20 * time.Second):
			t.Errorf("in Go %v: the daemon still streams 20 s after SIGINT: the connection was not closed", inGo)
		}
		go io.Copy(io.Discard, out)
		waitBounded(t, cmd)
		if code, want := cmd.ProcessState.ExitCode(), "staticpodd: interrupted; the command was killed\n"; code != 130 || errOut.String() != want {
			t.Errorf("in Go %v: exit %d, stderr %q; want 130 and %q", inGo, code, errOut.String(), want)
		}
	}
}

// TestQuickExecOutputsReaderGone: when what reads the output goes away,
// the exec dies of SIGPIPE even if it was started with SIGPIPE ignored (a
// service's IgnoreSIGPIPE=, a shell's trap), as the Go runtime makes a
// program do, and the daemon sees it leave; both ways.
func TestQuickExecOutputsReaderGone(t *testing.T) {
	t.Parallel()
	for _, inGo := range []bool{false, true} {
		dir, _, left := streamingDaemon(t)
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			io.ReadFull(r, make([]byte, 4096))
			r.Close()
		}()
		_, st := runExecShell(t, inGo, "trap '' PIPE;", "", w, "--run-dir", dir, "web", "--", "yes")
		w.Close()
		ws := st.Sys().(syscall.WaitStatus)
		if !ws.Signaled() || ws.Signal() != syscall.SIGPIPE {
			t.Errorf("in Go %v: the exec ended with %v; want SIGPIPE", inGo, st)
		}
		select {
		case <-left:
		case <-time.After(20 * time.Second):
			t.Errorf("in Go %v: the daemon still streams 20 s after the exec ended", inGo)
		}
	}
}

// TestQuickExecKubeletPersonality: through a name whose base is kubelet
// (trailing slashes dropped, as filepath.Base drops them), `exec` is the
// kubelet's command line's, not the exec: the quick exec leaves it alone.
func TestQuickExecKubeletPersonality(t *testing.T) {
	t.Parallel()
	dir, got := fakeExecDaemon(t, func(c net.Conn) { io.WriteString(c, answer101+"\r\n"+string(frame(3, `{"exitCode":0}`))) })
	for _, name := range []string{"/usr/bin/kubelet", "/usr/bin/kubelet/", "kubelet//"} {
		cmd := exec.Command(testdaemon.Bin, "exec", "--run-dir", dir, "web", "--", "true")
		cmd.Args[0] = name
		cmd.Env = append(os.Environ(), "GODEBUG=inittrace=1")
		out, _ := cmd.CombinedOutput()
		r := splitInitTrace("", string(out), cmd.ProcessState.ExitCode())
		if !r.goStarted || r.code == 0 {
			t.Errorf("argv[0] %q: exit %d, Go started %v (%q); want the kubelet personality's refusal", name, r.code, r.goStarted, r.stderr)
		}
	}
	select {
	case line := <-got:
		t.Errorf("the daemon was asked %q", line)
	default:
	}
}

// TestQuickExecStatusTooDeep: a status nested deeper than encoding/json
// takes is not read, both ways (the wording of why differs).
func TestQuickExecStatusTooDeep(t *testing.T) {
	t.Parallel()
	dir, _ := fakeExecDaemon(t, func(c net.Conn) {
		io.WriteString(c, answer101+"\r\n"+string(frame(3, `{"exitCode":0,"x":`+strings.Repeat("[", 10000)+strings.Repeat("]", 10000)+`}`)))
	})
	for _, inGo := range []bool{false, true} {
		r := runExecWay(t, inGo, nil, nil, "--run-dir", dir, "web", "--", "true")
		if r.code != 1 || !strings.HasPrefix(r.stderr, "staticpodd: decode the exit status: ") || r.goStarted != inGo {
			t.Errorf("in Go %v: exit %d, stderr %q, Go started %v; want 1 and decode the exit status", inGo, r.code, r.stderr, r.goStarted)
		}
	}
}

// TestQuickExecSignalsGoIgnores: the signals the Go runtime catches and
// does nothing with (SIGUSR1, an inherited alarm's SIGALRM, SIGXFSZ past a
// file size limit, SIGPWR, the real-time ones) do not end the exec, nor kill
// its command; both ways.
func TestQuickExecSignalsGoIgnores(t *testing.T) {
	t.Parallel()
	sigs := []syscall.Signal{syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGXFSZ, syscall.SIGPWR, syscall.SIGVTALRM, syscall.SIGPIPE,
		syscall.Signal(35), syscall.Signal(64)}
	for _, inGo := range []bool{false, true} {
		proceed := make(chan struct{})
		dir, _ := fakeExecDaemon(t, func(c net.Conn) {
			io.WriteString(c, answer101+"\r\n"+string(frame(1, "start\n")))
			<-proceed
			io.WriteString(c, string(frame(1, "end\n"))+string(frame(3, `{"exitCode":0}`)))
		})
		cmd := execAt(inGo, dir, "true")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		br := bufio.NewReader(out)
		if line, _ := br.ReadString('\n'); line != "start\n" {
			t.Fatalf("stdout %q", line)
		}
		for _, sig := range sigs {
			cmd.Process.Signal(sig)
		}
		// Each taken: none pending any more (or the process gone).
		deadline := time.Now().Add(10 * time.Second)
		for pendingSignals(cmd.Process.Pid)&sigMask(sigs) != 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		close(proceed)
		rest, _ := io.ReadAll(br)
		waitBounded(t, cmd)
		if st := cmd.ProcessState; st.ExitCode() != 0 || string(rest) != "end\n" {
			t.Errorf("in Go %v: %v after the signals, the rest of stdout %q; want exit 0 and end", inGo, st, rest)
		}
	}
}

func sigMask(sigs []syscall.Signal) uint64 {
	var m uint64
	for _, s := range sigs {
		m |= 1 << (uint(s) - 1)
	}
	return m
}

// pendingSignals is the set of signals pending for pid (its process's and
// its threads'), 0 once it is gone.
func pendingSignals(pid int) uint64 {
	var m uint64
	tasks, _ := filepath.Glob(filepath.Join("/proc", strconv.Itoa(pid), "task", "*", "status"))
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && (k == "SigPnd" || k == "ShdPnd") {
				n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				m |= n
			}
		}
	}
	return m
}

// TestQuickExecReadErrorNamesTheSocketAsGo: a connection reset after the
// 101 is said with the socket's path as filepath.Join makes it, both ways.
func TestQuickExecReadErrorNamesTheSocketAsGo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	l, err := net.Listen("unix", filepath.Join(dir, "staticpodd.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			// The request read in part: closing with the rest unread resets
			// the connection.
			c.Read(make([]byte, 8))
			io.WriteString(c, answer101+"\r\n"+string(frame(1, "x")))
			c.Close()
		}
	}()
	runDir := strings.ReplaceAll(dir, "/", "//") + "//"
	r := compareWays(t, nil, true, "--run-dir", runDir, "web", "--", "true")
	if want := "staticpodd: connection to the daemon lost before the command's exit status came: read unix @->" + filepath.Join(dir, "staticpodd.sock") + ": read: connection reset by peer\n"; r.stderr != want {
		t.Errorf("stderr %q, want %q", r.stderr, want)
	}
}
