package cri

import (
	"context"
	"errors"
	"io"
	"log/slog"

	remotecommandserver "k8s.io/cri-streaming/pkg/streaming/remotecommand"
	utilexec "k8s.io/utils/exec"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// streamRuntime runs the streaming server's execs in staticpodd's
// containers. Attach and port forwarding are not served (Attach and
// PortForward never hand out their URLs).
type streamRuntime struct {
	agent  Agent
	logger *slog.Logger
}

func (s streamRuntime) Exec(ctx context.Context, id string, cmd []string, in io.Reader, out, errw io.WriteCloser, tty bool, resize <-chan remotecommandserver.TerminalSize) error {
	spec := podspec.ExecSpec{Cmd: cmd, TTY: tty}
	// Interfaces holding nil pointers are not nil: set only the streams
	// the client asked for.
	if in != nil {
		spec.Stdin = in
	}
	if out != nil {
		spec.Stdout = out
	}
	if errw != nil && !tty {
		spec.Stderr = errw
	}
	if tty && resize != nil {
		sizes := make(chan podspec.TermSize, 1)
		spec.Resize = sizes
		// The client's first size comes as a resize: a client that sends
		// none gets the kernel's default.
		go func() {
			for {
				select {
				case sz, ok := <-resize:
					if !ok {
						return
					}
					// The newest size wins.
					select {
					case <-sizes:
					default:
					}
					sizes <- podspec.TermSize{Width: sz.Width, Height: sz.Height}
				case <-ctx.Done():
					return
				}
			}
		}()
	}
	code, err := s.agent.Exec(ctx, id, spec)
	switch {
	case errors.Is(err, podspec.ErrCommandNotFound):
		return utilexec.CodeExitError{Err: err, Code: 127}
	case errors.Is(err, podspec.ErrCommandNotExecutable):
		return utilexec.CodeExitError{Err: err, Code: 126}
	case err != nil:
		return err
	case code != 0:
		// What the streaming server sends back as the exit code.
		return utilexec.CodeExitError{Err: errors.New("command terminated with non-zero exit code"), Code: code}
	}
	return nil
}

func (streamRuntime) Attach(context.Context, string, io.Reader, io.WriteCloser, io.WriteCloser, bool, <-chan remotecommandserver.TerminalSize) error {
	return errors.ErrUnsupported
}

func (streamRuntime) PortForward(context.Context, string, int32, io.ReadWriteCloser) error {
	return errors.ErrUnsupported
}
