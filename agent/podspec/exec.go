package podspec

import (
	"errors"
	"io"
	"time"
)

// Errors of a runtime's Exec that callers branch on.
var (
	// ErrNotRunning: the container exists but has no running process to join
	// (created, exited).
	ErrNotRunning = errors.New("container is not running")
	// ErrCommandNotFound: the command is not in the container (exit status
	// 127 for shells, docker exec and staticpodd exec).
	ErrCommandNotFound = errors.New("command not found")
	// ErrCommandNotExecutable: the command exists but cannot be executed, a
	// permission or format problem (exit status 126).
	ErrCommandNotExecutable = errors.New("command cannot be executed")
	// ErrExecTimeout: the process outlived ExecSpec.Timeout and was killed.
	ErrExecTimeout = errors.New("command timed out")
)

// ExecSpec is a process to run in a running container, with the container's
// namespaces, cgroup, user, environment, working directory and security
// settings: what `staticpodd exec` and exec probes ask for.
type ExecSpec struct {
	// Cmd is the command and its arguments; Cmd[0] is looked up in the
	// container's PATH.
	Cmd []string
	// Env is set over the container's environment, by name.
	Env []EnvVar

	// TTY runs the process on a new pseudo-terminal: Stdin feeds it, Stdout
	// gets everything it prints, Stderr nothing.
	TTY bool
	// Size is the terminal's size at start (TTY only); zero leaves the
	// kernel's default.
	Size TermSize
	// Resize delivers the terminal's new sizes while the process runs (TTY
	// only); nil if it never changes.
	Resize <-chan TermSize

	// Stdin is copied to the process's standard input, which is closed when
	// Stdin returns EOF; nil gives it /dev/null. Exec does not wait for a
	// Read that blocks when the process has exited: the caller ends it.
	Stdin io.Reader
	// Stdout and Stderr receive the process's output; nil discards it
	// without copying. The same writer for both gets both through one
	// pipe, in order, one Write at a time (os/exec's rule). To bound what
	// is kept (an exec probe keeps 10 KiB), pass a writer that drops the
	// rest: a Write error also makes Exec drop the rest of that stream,
	// never block the process.
	Stdout, Stderr io.Writer

	// Timeout, when positive, bounds the process's run: on expiry it and
	// the processes of its process group are killed (SIGKILL), and Exec
	// returns an error wrapping ErrExecTimeout. The context bounds it too.
	Timeout time.Duration
}

// TermSize is a terminal's size in characters.
type TermSize struct {
	Width, Height uint16
}
