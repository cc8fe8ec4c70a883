package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/staticpodd/staticpodd/agent/describe"
	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/daemon"
)

// exitError makes main exit with code, saying msg first unless it is empty.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// newExecCmd is `staticpodd exec POD [-c NAME] [-i] [-t] -- CMD...`, run by the
// daemon, whose child the command is.
func newExecCmd(o *globalOptions) *cobra.Command {
	var container, namespace string
	var stdin, tty bool
	cmd := &cobra.Command{
		Use:   "exec POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARG...]",
		Short: "Run a command in a running container",
		Long: "Run a command in a running container, as kubectl exec does: with the\n" +
			"container's namespaces, cgroup, user, environment and security settings.\n" +
			"POD is the pod's name as the daemon shows it (<name>-<node>) or as its\n" +
			"manifest names it (<name>). Without -c, the container is the one the\n" +
			"pod's " + describe.DefaultContainerAnnotation + " annotation names, else the first.\n" +
			"staticpodd exits with the command's exit status: 127 if it was not\n" +
			"found, 126 if it could not be executed.",
		Args: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 1 || len(args) < 2 {
				return errors.New("usage: staticpodd exec POD [-c CONTAINER] [-i] [-t] -- COMMAND [ARG...]")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
			defer stop()
			c := daemon.NewRecordsClient(o.RootDir, o.RunDir, cmd.ErrOrStderr())
			e := newExecSession(args[1:], stdin, tty, cmd.ErrOrStderr())
			// One request: the daemon finds the pod and its container.
			q := e.query()
			q.Set("pod", args[0])
			if namespace != "" {
				q.Set("namespace", namespace)
			}
			if container != "" {
				q.Set("container", container)
			}
			err := e.run(ctx, c, "/exec?"+q.Encode())
			if refused := (*server.RefusedError)(nil); !errors.As(err, &refused) || refused.Code != http.StatusNotFound ||
				refused.Msg != "404 page not found" {
				return err
			}
			// A daemon from before POST /exec: find them here.
			pod, err := findPod(ctx, c, args[0], namespace)
			if err != nil {
				return err
			}
			name, note, err := describe.ExecContainer(pod, container)
			if err != nil {
				return err
			}
			if note != "" {
				fmt.Fprintln(cmd.ErrOrStderr(), note)
			}
			path := fmt.Sprintf("/exec/%s/%s/%s?%s", url.PathEscape(pod.Namespace), url.PathEscape(pod.Name),
				url.PathEscape(name), e.query().Encode())
			return e.run(ctx, c, path)
		},
	}
	cmd.Flags().StringVarP(&container, "container", "c", "", "the container (default: the pod's default container, else its first)")
	cmd.Flags().StringVarP(&namespace, "namespace", "n", "", "the pod's namespace, when the name is ambiguous")
	cmd.Flags().BoolVarP(&stdin, "stdin", "i", false, "pass standard input to the command")
	cmd.Flags().BoolVarP(&tty, "tty", "t", false, "run the command on a terminal (with -i: this one, in raw mode)")
	// Unknown to the quick exec (execfast.c), which leaves every flag it
	// does not know to Go: the tests run an exec both ways with it.
	cmd.Flags().Bool(testExecInGo, false, "for tests only: the exec in Go, not in the quick exec")
	if err := cmd.Flags().MarkHidden(testExecInGo); err != nil {
		panic(err) // a flag registered just above
	}
	return cmd
}

// testExecInGo is exec's hidden flag that leaves the quick exec out.
const testExecInGo = "test-exec-in-go"

// execAnswerTimeout bounds the wait for the daemon's answer to an exec (its
// 101, or why not): that of any request that is not a stream, such as the
// lookup of the pod that came first before the daemon found it.
var execAnswerTimeout = 10 * time.Second

// execSession is one exec through the daemon.
type execSession struct {
	command    []string
	stdin, tty bool
	stderr     io.Writer
}

// newExecSession is a session of command, without a terminal, as kubectl
// says, when -t -i is asked for on an input that is not one.
func newExecSession(command []string, stdin, tty bool, stderr io.Writer) *execSession {
	if tty && stdin && !isTerminal(os.Stdin) {
		fmt.Fprintln(stderr, "Unable to use a TTY - input is not a terminal or the right kind of file")
		tty = false
	}
	return &execSession{command: command, stdin: stdin, tty: tty, stderr: stderr}
}

func (e *execSession) query() url.Values {
	q := url.Values{"command": e.command}
	if e.stdin {
		q.Set("stdin", "true")
	}
	if e.tty {
		q.Set("tty", "true")
		if w, h, err := termSize(e.sizeFrom()); err == nil {
			q.Set("width", strconv.Itoa(int(w)))
			q.Set("height", strconv.Itoa(int(h)))
		}
		// The terminal is this one: say what it is, as ssh does.
		if term := os.Getenv("TERM"); term != "" {
			q.Set("env", "TERM="+term)
		}
	}
	return q
}

// sizeFrom is the local terminal whose size the command's follows.
func (e *execSession) sizeFrom() *os.File {
	if isTerminal(os.Stdin) {
		return os.Stdin
	}
	return os.Stdout
}

// run streams the exec at path until the command exits, and returns its exit
// status as an *exitError (nil for 0). Ending ctx (a signal) ends the
// connection, which kills the command.
func (e *execSession) run(ctx context.Context, c *daemon.Client, path string) error {
	conn, err := c.Dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// Ending ctx closes the connection, also while the daemon has not
	// answered yet (stuck, or this connection waiting in its backlog).
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	_ = conn.SetReadDeadline(time.Now().Add(execAnswerTimeout))
	frames, header, err := server.StartExec(conn, path)
	if err != nil {
		if ctx.Err() != nil {
			return &exitError{code: 130, msg: "interrupted before the daemon answered"}
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return fmt.Errorf("the daemon did not answer the exec within %v", execAnswerTimeout)
		}
		return err
	}
	_ = conn.SetReadDeadline(time.Time{}) // the command's output comes as it comes
	if note := header.Get(server.NoteHeader); note != "" {
		fmt.Fprintln(e.stderr, describe.Escape(note))
	}
	if e.tty && e.stdin {
		restore, err := makeRaw(os.Stdin)
		if err != nil {
			return fmt.Errorf("put the terminal in raw mode: %w", err)
		}
		defer restore()
	}
	w := server.NewFrameWriter(conn)
	if e.stdin {
		go sendStdin(w, os.Stdin)
	}
	if e.tty {
		done := make(chan struct{})
		defer close(done)
		go e.sendResizes(w, done)
	}
	st, err := readOutput(frames, os.Stdout, os.Stderr)
	if err != nil {
		if ctx.Err() != nil {
			return &exitError{code: 130, msg: "interrupted; the command was killed"}
		}
		return err
	}
	if st.ExitCode == 0 && st.Error == "" {
		return nil
	}
	code := st.ExitCode
	if code <= 0 || code > 255 {
		code = 1
	}
	return &exitError{code: code, msg: st.Error}
}

// sendStdin sends r as input frames, then says it ended.
func sendStdin(w *server.FrameWriter, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if werr := w.WriteFrame(server.StreamStdin, buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			_ = w.WriteFrame(server.StreamClose, []byte{server.StreamStdin})
			return
		}
	}
}

// sendResizes sends the local terminal's size each time it changes
// (SIGWINCH), until done.
func (e *execSession) sendResizes(w *server.FrameWriter, done <-chan struct{}) {
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	defer signal.Stop(winch)
	for {
		select {
		case <-done:
			return
		case <-winch:
			width, height, err := termSize(e.sizeFrom())
			if err != nil {
				continue
			}
			p := binary.BigEndian.AppendUint16(binary.BigEndian.AppendUint16(nil, width), height)
			if w.WriteFrame(server.StreamResize, p) != nil {
				return
			}
		}
	}
}

// readOutput copies output frames to stdout and stderr until the status.
func readOutput(r *bufio.Reader, stdout, stderr io.Writer) (server.ExecStatus, error) {
	buf := server.FrameBuffer()
	for {
		stream, p, err := server.ReadFrame(r, buf)
		if err != nil {
			return server.ExecStatus{}, fmt.Errorf("connection to the daemon lost before the command's exit status came: %w", err)
		}
		switch stream {
		case server.StreamStdout:
			_, _ = stdout.Write(p)
		case server.StreamStderr:
			_, _ = stderr.Write(p)
		case server.StreamStatus:
			var st server.ExecStatus
			if err := json.Unmarshal(p, &st); err != nil {
				return st, fmt.Errorf("decode the exit status: %w", err)
			}
			return st, nil
		}
	}
}
