package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/server"
)

// execAgent has one running pod, web-node1, with containers web and side;
// an exec in web exits with 3.
type execAgent struct{ psAgent }

func (execAgent) Pods() []v1.Pod {
	return []v1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: "u-web"},
		Spec:       v1.PodSpec{NodeName: "node1", Containers: []v1.Container{{Name: "web"}, {Name: "side"}}},
	}}
}

func (execAgent) ExecTarget(ns, pod, ctr string) (string, error) {
	if ns == "default" && pod == "web-node1" && ctr == "web" {
		return "c1", nil
	}
	return "", podspec.ErrNotExist
}

func (execAgent) Exec(context.Context, string, podspec.ExecSpec) (int, error) { return 3, nil }

// serveExecDaemon serves h on <dir>/staticpodd.sock.
func serveExecDaemon(t *testing.T, dir string, h http.Handler) {
	t.Helper()
	l, err := server.ListenUnix(filepath.Join(dir, socketName))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

// serveOneConn answers the first connection on <dir>/staticpodd.sock with
// handle, which owns the connection but need not close it.
func serveOneConn(t *testing.T, dir string, handle func(net.Conn)) {
	t.Helper()
	l, err := server.ListenUnix(filepath.Join(dir, socketName))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		handle(conn)
	}()
}

// runExecBounded is runExec of `web -- true` that fails the test, saying
// what it waited for, if the command has not ended 30 s on: only a bound
// for the failure, the pass waits on the command.
func runExecBounded(t *testing.T, ctx context.Context, dir, waitsFor string) error {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		_, err := runExec(ctx, dir, "web", "--", "true")
		done <- err
	}()
	select {
	case err := <-done:
		return err
	case <-time.After(30 * time.Second):
		t.Fatalf("staticpodd exec still waits %s", waitsFor)
		return nil
	}
}

func runExec(ctx context.Context, runDir string, args ...string) (string, error) {
	cmd := newExecCmd(&globalOptions{RunDir: runDir, RootDir: runDir})
	var stderr bytes.Buffer
	cmd.SetOut(io.Discard)
	cmd.SetErr(&stderr)
	cmd.SetArgs(args)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	err := cmd.ExecuteContext(ctx)
	return stderr.String(), err
}

// TestExecOldDaemon: a daemon from before POST /exec (404 page not found)
// gets the lookup and the kubelet API's path from the CLI, with the same
// note and exit status as a new one.
func TestExecOldDaemon(t *testing.T) {
	cli := server.CLI(execAgent{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, tc := range []struct {
		name string
		h    http.Handler
	}{
		{"new", cli},
		{"old", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/exec" {
				http.NotFound(w, r)
				return
			}
			cli.ServeHTTP(w, r)
		})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			serveExecDaemon(t, dir, tc.h)
			stderr, err := runExec(context.Background(), dir, "web", "--", "true")
			var exit *exitError
			if !errors.As(err, &exit) || exit.code != 3 {
				t.Errorf("err %v, want exit status 3", err)
			}
			if want := `Defaulted container "web" out of: web, side` + "\n"; stderr != want {
				t.Errorf("stderr %q, want %q", stderr, want)
			}
			if _, err := runExec(context.Background(), dir, "nope", "--", "true"); err == nil || err.Error() != `no pod "nope"` {
				t.Errorf("unknown pod: %v", err)
			}
		})
	}
}

// TestExecInterrupted: while the daemon has not answered the exec (it is
// stuck, or every connection it serves is taken and this one waits in the
// listen backlog), a signal ends staticpodd exec, as it ends the lookup of
// the pod that came first before.
func TestExecInterrupted(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serveOneConn(t, dir, func(conn net.Conn) {
		// Read the request, never answer it.
		buf := make([]byte, 4096)
		if _, err := conn.Read(buf); err == nil {
			cancel() // the user's ^C, once the request is sent
		}
		_, _ = io.Copy(io.Discard, conn)
	})
	err := runExecBounded(t, ctx, dir, "for the daemon's answer 30s after it was interrupted")
	var exit *exitError
	if !errors.As(err, &exit) || exit.code != 130 || !strings.Contains(exit.msg, "interrupted") {
		t.Errorf("err %v, want exit status 130, interrupted", err)
	}
}

// TestExecNoteEscaped: the note comes from whatever answers on the socket;
// staticpodd prints it as it prints the daemon's errors, its terminal
// controls shown, not obeyed (the daemon drops only C0 controls and DEL
// from it, not a C1 CSI).
func TestExecNoteEscaped(t *testing.T) {
	dir := t.TempDir()
	serveOneConn(t, dir, func(conn net.Conn) {
		if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
			return
		}
		_, _ = io.WriteString(conn, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: "+server.ExecProtocol+
			"\r\n"+server.NoteHeader+": Defaulted container \"a\" out of: a\u009b2J, b\r\n\r\n")
		_ = server.NewFrameWriter(conn).WriteFrame(server.StreamStatus, []byte(`{"exitCode":0}`))
	})
	stderr, err := runExec(context.Background(), dir, "web", "--", "true")
	if err != nil {
		t.Fatal(err)
	}
	if want := `Defaulted container "a" out of: a\u009b2J, b` + "\n"; stderr != want {
		t.Errorf("stderr %q, want %q", stderr, want)
	}
}

// TestExecDaemonSilent: a daemon that takes the exec and never answers it
// (stuck, or this connection waiting in its backlog) fails staticpodd exec
// after execAnswerTimeout, as the lookup of the pod did when it came first,
// instead of keeping a script waiting for ever.
func TestExecDaemonSilent(t *testing.T) {
	dir := t.TempDir()
	serveOneConn(t, dir, func(conn net.Conn) { _, _ = io.Copy(io.Discard, conn) })
	defer func(d time.Duration) { execAnswerTimeout = d }(execAnswerTimeout)
	execAnswerTimeout = time.Nanosecond // past once the request is sent: no wait
	if err := runExecBounded(t, context.Background(), dir, "for a daemon that does not answer"); err == nil ||
		!strings.Contains(err.Error(), "did not answer") {
		t.Errorf("err %v, want the daemon did not answer", err)
	}
}
