package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// execClient is one exec connection to srv.
type execClient struct {
	conn net.Conn
	r    *bufio.Reader
	w    *FrameWriter
}

func dialExec(t *testing.T, srv *httptest.Server, path string) (*execClient, error) {
	t.Helper()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	r, _, err := StartExec(conn, path)
	if err != nil {
		return nil, err
	}
	return &execClient{conn: conn, r: r, w: NewFrameWriter(conn)}, nil
}

// result reads frames until the status, and returns it with the output.
func (c *execClient) result(t *testing.T) (st ExecStatus, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	buf := FrameBuffer()
	for {
		stream, p, err := ReadFrame(c.r, buf)
		if err != nil {
			t.Fatalf("connection ended without a status (%v); stdout %q", err, out.String())
		}
		switch stream {
		case StreamStdout:
			out.Write(p)
		case StreamStderr:
			errOut.Write(p)
		case StreamStatus:
			if err := json.Unmarshal(p, &st); err != nil {
				t.Fatal(err)
			}
			return st, out.String(), errOut.String()
		}
	}
}

func execPath(container string, q url.Values) string {
	return "/exec/default/web-node1/" + container + "?" + q.Encode()
}

func TestExecStreams(t *testing.T) {
	a := testAgent
	a.exec = func(ctx context.Context, id string, spec podspec.ExecSpec) (int, error) {
		in, err := io.ReadAll(spec.Stdin)
		if err != nil {
			return -1, err
		}
		fmt.Fprintf(spec.Stdout, "%s %q got %q", id, spec.Cmd, in)
		var env []string
		for _, e := range spec.Env {
			env = append(env, e.Name+"="+e.Value)
		}
		fmt.Fprintf(spec.Stderr, "env %v tty %v", env, spec.TTY)
		return 3, nil
	}
	srv := httptest.NewServer(CLI(a, logger()))
	defer srv.Close()
	c, err := dialExec(t, srv, execPath("web", url.Values{"command": {"sh", "-c", "x"}, "stdin": {"true"}, "env": {"TERM=xterm"}}))
	if err != nil {
		t.Fatal(err)
	}
	big := strings.Repeat("x", 100<<10) // more than a frame
	for _, p := range []string{"hello ", big} {
		if err := c.w.WriteFrame(StreamStdin, []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.w.WriteFrame(StreamClose, []byte{StreamStdin}); err != nil {
		t.Fatal(err)
	}
	st, out, errOut := c.result(t)
	if want := fmt.Sprintf("c1 [\"sh\" \"-c\" \"x\"] got %q", "hello "+big); st.ExitCode != 3 || st.Error != "" || out != want {
		t.Errorf("status %+v, stdout %.80q; want exit 3 and %.80q", st, out, want)
	}
	if errOut != "env [TERM=xterm] tty false" {
		t.Errorf("stderr %q", errOut)
	}
}

func TestExecErrorsBeforeAndAfterStart(t *testing.T) {
	a := testAgent
	a.exec = func(ctx context.Context, id string, spec podspec.ExecSpec) (int, error) {
		return -1, fmt.Errorf("exec %q: %w", spec.Cmd[0], podspec.ErrCommandNotFound)
	}
	srv := httptest.NewServer(CLI(a, logger()))
	defer srv.Close()
	cmd := url.Values{"command": {"nosuch"}}
	for _, tc := range []struct{ path, want string }{
		{"/exec/default/nope-node1/web?" + cmd.Encode(), "pod default/nope-node1: does not exist"},
		{execPath("stopped", cmd), "container stopped is terminated: container is not running"},
		{execPath("web", nil), "exec: no command"},
	} {
		if _, err := dialExec(t, srv, tc.path); err == nil || err.Error() != tc.want {
			t.Errorf("exec %s = %v, want %q", tc.path, err, tc.want)
		}
	}
	resp, err := http.Post(srv.URL+execPath("web", cmd), "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUpgradeRequired {
		t.Errorf("exec without upgrade: %d, want 426", resp.StatusCode)
	}

	c, err := dialExec(t, srv, execPath("web", cmd))
	if err != nil {
		t.Fatal(err)
	}
	if st, _, _ := c.result(t); st.ExitCode != 127 || st.Error != `exec "nosuch": command not found` {
		t.Errorf("status %+v, want 127 and the error", st)
	}
}

func TestExecTTYResize(t *testing.T) {
	a := testAgent
	a.exec = func(ctx context.Context, id string, spec podspec.ExecSpec) (int, error) {
		fmt.Fprintf(spec.Stdout, "tty %v %dx%d\n", spec.TTY, spec.Size.Width, spec.Size.Height)
		sz := <-spec.Resize
		fmt.Fprintf(spec.Stdout, "resized %dx%d\n", sz.Width, sz.Height)
		return 0, nil
	}
	srv := httptest.NewServer(CLI(a, logger()))
	defer srv.Close()
	c, err := dialExec(t, srv, execPath("web", url.Values{"command": {"sh"}, "tty": {"true"}, "width": {"80"}, "height": {"24"}}))
	if err != nil {
		t.Fatal(err)
	}
	sz := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, 132), 43)
	if err := c.w.WriteFrame(StreamResize, sz); err != nil {
		t.Fatal(err)
	}
	if st, out, _ := c.result(t); st.ExitCode != 0 || out != "tty true 80x24\nresized 132x43\n" {
		t.Errorf("status %+v, stdout %q", st, out)
	}
}

// A client that leaves ends the command: Exec's context is cancelled.
func TestExecClientLeaves(t *testing.T) {
	started, cancelled := make(chan struct{}), make(chan error, 1)
	a := testAgent
	a.exec = func(ctx context.Context, id string, spec podspec.ExecSpec) (int, error) {
		close(started)
		<-ctx.Done()
		cancelled <- context.Cause(ctx)
		return 137, ctx.Err()
	}
	srv := httptest.NewServer(CLI(a, logger()))
	defer srv.Close()
	c, err := dialExec(t, srv, execPath("web", url.Values{"command": {"sleep", "1000"}, "stdin": {"true"}}))
	if err != nil {
		t.Fatal(err)
	}
	<-started
	c.conn.Close()
	if err := <-cancelled; err != errClientLeft {
		t.Errorf("Exec's context ended with %v, want %v", err, errClientLeft)
	}
}

// TestExecByName: POST /exec?pod= finds the pod by any name the CLI takes
// and the container kubectl would pick, with kubectl's note in the answer's
// header, and answers what it cannot find with the CLI's messages.
func TestExecByName(t *testing.T) {
	a := testAgent
	web := a.pods[0]
	web.Spec = v1.PodSpec{NodeName: "node1", Containers: []v1.Container{{Name: "web"}, {Name: "stopped"}}}
	other := *web.DeepCopy()
	other.Namespace = "other"
	evil := *web.DeepCopy()
	evil.Name, evil.Spec.Containers = "evil-node1", []v1.Container{{Name: "a\r\nX-Injected: 1"}, {Name: "b"}}
	a.pods = []v1.Pod{web, other, evil}
	a.exec = func(ctx context.Context, id string, spec podspec.ExecSpec) (int, error) {
		fmt.Fprintf(spec.Stdout, "%s %q", id, spec.Cmd)
		return 0, nil
	}
	srv := httptest.NewServer(CLI(a, logger()))
	defer srv.Close()
	byName := func(q url.Values) string {
		q.Set("command", "true")
		return "/exec?" + q.Encode()
	}
	for _, tc := range []struct {
		q          url.Values
		note, err  string
		errCode    int
		wantOutput string
	}{
		{q: url.Values{"pod": {"web"}, "namespace": {"default"}}, note: `Defaulted container "web" out of: web, stopped`, wantOutput: `c1 ["true"]`},
		{q: url.Values{"pod": {"default/web-node1"}, "container": {"web"}}, wantOutput: `c1 ["true"]`},
		{q: url.Values{"pod": {"web"}}, errCode: http.StatusNotFound, err: `pod name "web" is in several namespaces: choose one with -n`},
		{q: url.Values{"pod": {"nope"}}, errCode: http.StatusNotFound, err: `no pod "nope"`},
		{q: url.Values{"pod": {"web"}, "namespace": {"default"}, "container": {"nope"}}, errCode: http.StatusNotFound,
			err: `pod web-node1 has no container "nope"; it has web, stopped`},
		{q: url.Values{"pod": {"web"}, "namespace": {"default"}, "container": {"stopped"}}, errCode: http.StatusConflict,
			err: "container stopped is terminated: container is not running"},
		{q: url.Values{}, errCode: http.StatusBadRequest, err: "exec: no pod"},
	} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		r, header, err := StartExec(conn, byName(tc.q))
		if tc.err != "" {
			var refused *RefusedError
			if !errors.As(err, &refused) || refused.Code != tc.errCode || refused.Msg != tc.err {
				t.Errorf("%v: %v; want %d %q", tc.q, err, tc.errCode, tc.err)
			}
			conn.Close()
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.q, err)
		}
		if got := header.Get(NoteHeader); got != tc.note {
			t.Errorf("%v: note %q, want %q", tc.q, got, tc.note)
		}
		st, out, _ := (&execClient{conn: conn, r: r}).result(t)
		if st.ExitCode != 0 || out != tc.wantOutput {
			t.Errorf("%v: %+v %q; want exit 0 and %q", tc.q, st, out, tc.wantOutput)
		}
		conn.Close()
	}
	// A note is one header line, whatever the names it quotes hold.
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST "+byName(url.Values{"pod": {"evil"}})+" HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: "+ExecProtocol+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("X-Injected") != "" ||
		resp.Header.Get(NoteHeader) != `Defaulted container "a\r\nX-Injected: 1" out of: aX-Injected: 1, b` {
		t.Errorf("answer %d, header %q", resp.StatusCode, resp.Header)
	}
}
