package main

import (
	"slices"
	"testing"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/daemon"
)

// TestQuickExecNames holds the quick exec's names and figures (execfast.c)
// to the Go side's: the run dir's variable and default, the socket, the
// kubelet personality, the protocol, the note header, the answer's timeout
// and the largest frame.
func TestQuickExecNames(t *testing.T) {
	if !haveQuickExec {
		t.Skip("built without cgo: no quick exec")
	}
	names, maxFrame := quickExecNames()
	want := []string{config.EnvRunDir, config.DefaultRunDir, daemon.SocketName, config.KubeletName,
		server.ExecProtocol, server.NoteHeader, execAnswerTimeout.String()}
	if !slices.Equal(names, want) {
		t.Errorf("execfast.c has %q, the Go side %q", names, want)
	}
	if n := len(server.FrameBuffer()); maxFrame != n {
		t.Errorf("execfast.c's largest frame is %d bytes, server's %d", maxFrame, n)
	}
}
