package tests

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestExecTTYEndOfInput: Ctrl-D at the shell's prompt in `staticpodd exec -it`
// ends the shell, exit 0, and the terminal shows nothing the user did not type
// or the shell did not print: no NUL (which a terminal echoes as ^@).
func TestExecTTYEndOfInput(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", sleeper("web", ""))
	d.WaitRunning("web", 30*time.Second)

	for try := range 3 {
		term, cmd, exited := startExecTTY(t, d, 100, 30)
		term.run(t, "echo do''ne", "done")
		term.write(t, "\x04") // Ctrl-D: the end of the shell's input
		select {
		case err := <-exited:
			var exit *exec.ExitError
			if err != nil && !errors.As(err, &exit) {
				t.Fatal(err)
			}
			if err != nil {
				t.Errorf("try %d: exec -it ended with %v after Ctrl-D, want exit 0", try, err)
			}
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			t.Fatalf("try %d: exec -it still runs 20s after Ctrl-D", try)
		}
		// What the CLI wrote after its command ended reaches the master
		// before the CLI's exit.
		term.mu.Lock()
		out := string(term.out)
		term.mu.Unlock()
		if strings.Contains(out, "\x00") || strings.Contains(out, "^@") {
			t.Errorf("try %d: the terminal shows a NUL (^@) after Ctrl-D: %q", try, out)
		}
	}
}
