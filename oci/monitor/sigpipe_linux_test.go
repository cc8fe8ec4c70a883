//go:build linux && cgo

package monitor

import (
	"errors"
	"os"
	"os/exec"
	"syscall"
	"testing"
)

// The monitor's Go roles write to the daemon's stderr; one whose reader went
// away (journald restarted, the terminal of `staticpodd exec` closed) makes
// the write fail, and the role goes on: it is not killed by SIGPIPE, which
// would leave an exec server's processes unreaped. Each role here is given
// a command line it refuses, which it says on stderr before it exits 2.
func TestGoRolesSurviveAClosedStderr(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, role := range []string{ExecArg, GzipArg} {
		t.Run(role, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			r.Close()
			defer w.Close()
			cmd := exec.Command(exe, role, "an", "argument", "too", "many", "for", "it")
			cmd.Stderr = w
			err = cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("%s with a closed stderr: %v, want exit status 2", role, err)
			}
			ws := ee.Sys().(syscall.WaitStatus)
			if ws.Signaled() || ws.ExitStatus() != 2 {
				t.Fatalf("%s with a closed stderr: %v, want exit status 2 (the usage error it writes must not kill it)", role, err)
			}
		})
	}
}
