//go:build linux && cgo

package oci

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// An exec handed to an exec server that dies before it answers (killed as
// the exec comes) fails, instead of waiting for ever for its report; the
// execs after it start a new server.
func TestExecToADyingServerEnds(t *testing.T) {
	x := runningContainer(t, nil)
	for range 10 {
		x.run(t, podspec.ExecSpec{Cmd: []string{"true"}})
		server := findProc(func(pid, _ int, cmdline []string) bool {
			return isExecServer(pid) && slices.Contains(cmdline, x.rt.libcontainerRoot())
		})
		if server == 0 {
			t.Fatal("no exec server after an exec")
		}
		_ = syscall.Kill(server, syscall.SIGKILL)
		done := make(chan error, 1)
		go func() {
			_, err := x.rt.Exec(context.Background(), x.st.ID, podspec.ExecSpec{Cmd: []string{"true"}})
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Logf("exec as the server died: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("an exec handed to a server that died had not returned after 20s")
		}
		waitPidExit(t, server, 20*time.Second)
	}
}
