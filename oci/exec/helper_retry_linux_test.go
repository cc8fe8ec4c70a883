//go:build linux && cgo

package exec

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// fakeServerEnv, set in a Helper's environment, makes this test program an
// exec server that takes one exec: it waits until the exec's whole request
// is on the exec's socket, writes a line to the file the variable names (the
// exec's process would start there), and exits, closing the socket.
const fakeServerEnv = "STATICPODD_TEST_FAKE_EXEC_SERVER"

func TestMain(m *testing.M) {
	if rec := os.Getenv(fakeServerEnv); rec != "" && len(os.Args) > 1 && os.Args[1] == mon.ExecArg {
		os.Exit(fakeServer(rec))
	}
	os.Exit(m.Run())
}

func fakeServer(rec string) int {
	oob := make([]byte, unix.CmsgSpace(4*mon.MaxExecFiles))
	_, oobn, _, _, err := unix.Recvmsg(3, make([]byte, 1), oob, unix.MSG_CMSG_CLOEXEC)
	if err != nil {
		return 1
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil || len(msgs) == 0 {
		return 1
	}
	rights, err := unix.ParseUnixRights(&msgs[0])
	if err != nil || len(rights) == 0 {
		return 1
	}
	conn := rights[0]
	buf := make([]byte, 4<<20)
	for {
		pfd := []unix.PollFd{{Fd: int32(conn), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, -1); err != nil && err != unix.EINTR {
			return 1
		}
		// Peeked, not read: as a server that read the request before
		// the daemon's goroutine came to write what is left of it.
		n, _, err := unix.Recvfrom(conn, buf, unix.MSG_PEEK|unix.MSG_DONTWAIT)
		if err == nil && n == 0 {
			return 1 // the daemon closed it
		}
		if err == nil && json.Valid(bytes.TrimSpace(buf[:n])) {
			break
		}
	}
	f, err := os.OpenFile(rec, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return 1
	}
	_, _ = f.WriteString("started\n")
	_ = f.Close()
	return 0 // dies with the exec, as a server killed after it started it
}

// An exec whose request the server had in full may have started: when the
// daemon then fails to write the rest of it (the request's newline, as the
// server died or closed the socket), it is not handed to a new server, which
// would run the command a second time.
func TestExecTheServerTookIsNotRetried(t *testing.T) {
	// What a fresh exec socket takes in one write before it would block.
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	first, err := unix.Write(fds[0], make([]byte, 4<<20))
	_, _ = unix.Close(fds[0]), unix.Close(fds[1])
	if err != nil || first <= 0 {
		t.Fatalf("probe write: %d, %v", first, err)
	}
	// A request whose JSON is that long: all of it but the newline goes
	// in the first write.
	spec := specs.Process{Args: []string{"true"}, Env: []string{"PAD="}}
	req := mon.ExecRequest{ID: "c", Process: spec}
	b, err := json.Marshal(&req)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > first {
		t.Fatalf("request of %d bytes already over %d", len(b), first)
	}
	spec.Env[0] += strings.Repeat("x", first-len(b))
	req.Process = spec
	if b, _ = json.Marshal(&req); len(b) != first {
		t.Fatalf("padded request is %d bytes, want %d", len(b), first)
	}

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	rec := filepath.Join(t.TempDir(), "started")
	if err := os.WriteFile(rec, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	s := NewServer(Helper{Path: exe, Env: append(os.Environ(), fakeServerEnv+"="+rec)}, t.TempDir(), time.Hour)
	defer s.Close()
	hp := &helperProcess{server: s, id: "c", spec: spec, es: podspec.ExecSpec{Cmd: []string{"true"}}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := hp.start(ctx, childIO{}); err == nil {
		t.Fatal("start on a server that went away with the exec succeeded")
	} else {
		t.Logf("start: %v", err)
	}
	got, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(got), "started\n"); n != 1 {
		t.Fatalf("the exec was started by %d servers, want 1", n)
	}
}
