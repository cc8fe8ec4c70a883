//go:build linux && cgo

package exec

import (
	"bufio"
	"context"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// A start whose context ends as the server reports the process's pid asks
// the server to kill that process: the end of the context, which cuts the
// exec socket's reads and writes short, does not cut the kill short too.
func TestServerStartCancelledAsThePidComesKillsIt(t *testing.T) {
	for i := range 5000 {
		fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		ctl, theirs := os.NewFile(uintptr(fds[0]), "ctl"), os.NewFile(uintptr(fds[1]), "ctl-server")
		s := &Server{idle: time.Hour}
		s.cur = &serverProc{ctl: ctl, done: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		served := make(chan string, 1)
		go func() {
			// The server: take the exec, report a pid as the caller's
			// context ends, and read what follows.
			defer theirs.Close()
			oob := make([]byte, unix.CmsgSpace(4*mon.MaxExecFiles))
			_, oobn, _, _, err := unix.Recvmsg(int(theirs.Fd()), make([]byte, 1), oob, unix.MSG_CMSG_CLOEXEC)
			if err != nil {
				served <- "recvmsg: " + err.Error()
				return
			}
			msgs, _ := unix.ParseSocketControlMessage(oob[:oobn])
			rights, _ := unix.ParseUnixRights(&msgs[0])
			conn := os.NewFile(uintptr(rights[0]), "exec")
			defer conn.Close()
			r := bufio.NewReader(conn)
			if _, err := r.ReadString('\n'); err != nil {
				served <- "request: " + err.Error()
				return
			}
			cancel()
			_, _ = conn.Write([]byte(`{"pid":4194304}` + "\n"))
			_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
			rest, _ := io.ReadAll(r)
			served <- string(rest)
		}()
		hp := &helperProcess{server: s, id: "c", es: podspec.ExecSpec{Cmd: []string{"true"}}}
		_, err = hp.start(ctx, childIO{})
		rest := <-served
		cancel()
		_ = ctl.Close()
		if err != nil && !strings.Contains(rest, `"kill":true`) {
			t.Fatalf("iteration %d: start = %v, and the server was not asked to kill (it read %q)", i, err, rest)
		}
		if err == nil {
			hp.finish()
		}
	}
}
