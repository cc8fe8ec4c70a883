package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// stdinQueue is how many frames of input wait for the process to read them
// while the connection is still read, to see the client leave.
const stdinQueue = 16

// execHandler serves POST /exec/{namespace}/{pod}/{container}, the kubelet
// API's path, with the query ?command=... (repeated, in order), &stdin=true,
// &tty=true, &width= and &height= (the terminal's size), &env=NAME=value
// (repeated). The request must ask to upgrade to ExecProtocol; errors before
// the command runs are plain HTTP answers (404 unknown pod or container, 409
// not running). Then the command's input and output go as frames, and an
// ExecStatus ends the connection. A client that leaves kills the command.
func execHandler(a Agent, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !headerHas(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), ExecProtocol) {
			http.Error(w, "exec needs Connection: Upgrade and Upgrade: "+ExecProtocol, http.StatusUpgradeRequired)
			return
		}
		q := r.URL.Query()
		spec := podspec.ExecSpec{Cmd: q["command"], TTY: q.Get("tty") == "true"}
		if len(spec.Cmd) == 0 {
			http.Error(w, "exec: no command", http.StatusBadRequest)
			return
		}
		for _, kv := range q["env"] {
			name, value, ok := strings.Cut(kv, "=")
			if !ok || name == "" {
				http.Error(w, "exec: env "+strconv.Quote(kv)+" is not NAME=value", http.StatusBadRequest)
				return
			}
			spec.Env = append(spec.Env, podspec.EnvVar{Name: name, Value: value})
		}
		if spec.TTY {
			width, _ := strconv.ParseUint(q.Get("width"), 10, 16)
			height, _ := strconv.ParseUint(q.Get("height"), 10, 16)
			spec.Size = podspec.TermSize{Width: uint16(width), Height: uint16(height)}
		}
		ns, pod, ctr := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
		id, err := a.ExecTarget(ns, pod, ctr)
		if err != nil {
			code := http.StatusInternalServerError
			switch {
			case errors.Is(err, podspec.ErrNotExist):
				code = http.StatusNotFound
			case errors.Is(err, podspec.ErrNotRunning):
				code = http.StatusConflict
			}
			http.Error(w, err.Error(), code)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			http.Error(w, "exec: "+err.Error(), http.StatusInternalServerError)
			return
		}
		defer conn.Close()
		// The server's timeouts are for requests; the exec lasts as long
		// as its command.
		_ = conn.SetDeadline(time.Time{})
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + ExecProtocol + "\r\n\r\n")
		if err := brw.Flush(); err != nil {
			return
		}

		ctx, cancel := context.WithCancelCause(context.Background())
		defer cancel(nil)
		out := NewFrameWriter(conn)
		spec.Stdout = &leaveOnError{out.StreamWriter(StreamStdout), cancel}
		spec.Stderr = &leaveOnError{out.StreamWriter(StreamStderr), cancel}
		var stdin *io.PipeReader
		stdinFrames := make(chan []byte, stdinQueue)
		var stdinW *io.PipeWriter
		if q.Get("stdin") == "true" {
			stdin, stdinW = io.Pipe()
			spec.Stdin = stdin
			go feedStdin(ctx, stdinW, stdinFrames)
		}
		resize := make(chan podspec.TermSize, 1)
		if spec.TTY {
			spec.Resize = resize
		}
		go readClientFrames(ctx, cancel, brw.Reader, stdinFrames, resize, stdinW != nil)

		begin := time.Now()
		code, err := a.Exec(ctx, id, spec)
		if stdin != nil {
			_ = stdin.Close() // ends feedStdin
		}
		st := ExecStatus{ExitCode: code}
		switch {
		case err == nil:
		case errors.Is(err, podspec.ErrCommandNotFound):
			st = ExecStatus{ExitCode: 127, Error: err.Error()}
		case errors.Is(err, podspec.ErrCommandNotExecutable):
			st = ExecStatus{ExitCode: 126, Error: err.Error()}
		default:
			st = ExecStatus{ExitCode: 1, Error: err.Error()}
		}
		attrs := []any{"pod", ns + "/" + pod, "container", ctr, "command", spec.Cmd[0],
			"exitCode", st.ExitCode, "duration", time.Since(begin)}
		if err != nil {
			attrs = append(attrs, "err", err)
		}
		logger.Info("exec ended", attrs...)
		if context.Cause(ctx) != nil {
			return // the client left
		}
		b, _ := json.Marshal(st)
		_ = out.WriteFrame(StreamStatus, b)
	}
}

// StartExec sends the exec request for path (/exec/..., with its query) over
// conn and reads the answer. On 101 it returns the reader of the frames that
// follow; otherwise an error saying what the daemon answered.
func StartExec(conn io.ReadWriter, path string) (*bufio.Reader, error) {
	req, err := http.NewRequest(http.MethodPost, "http://staticpodd"+path, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", ExecProtocol)
	if err := req.Write(conn); err != nil {
		return nil, fmt.Errorf("send exec request: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, fmt.Errorf("read exec answer: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, errors.New(strings.TrimSpace(string(body)))
	}
	return br, nil
}

// readClientFrames reads the client's frames until the connection ends,
// which cancels the exec: the client has left.
func readClientFrames(ctx context.Context, cancel context.CancelCauseFunc, r *bufio.Reader, stdin chan<- []byte, resize chan podspec.TermSize, withStdin bool) {
	buf := FrameBuffer()
	for {
		stream, p, err := ReadFrame(r, buf)
		if err != nil {
			cancel(errClientLeft)
			return
		}
		switch stream {
		case StreamStdin:
			if !withStdin {
				continue
			}
			select {
			case stdin <- append([]byte(nil), p...):
			case <-ctx.Done():
				return
			}
		case StreamClose:
			if withStdin && len(p) == 1 && p[0] == StreamStdin {
				withStdin = false
				close(stdin)
			}
		case StreamResize:
			if len(p) != 4 {
				continue
			}
			sz := podspec.TermSize{Width: binary.BigEndian.Uint16(p), Height: binary.BigEndian.Uint16(p[2:])}
			// The newest size wins.
			select {
			case <-resize:
			default:
			}
			resize <- sz
		}
	}
}

var errClientLeft = errors.New("exec client left")

// feedStdin writes the client's input frames to w, in order, and closes w at
// the end of the input.
func feedStdin(ctx context.Context, w *io.PipeWriter, frames <-chan []byte) {
	for {
		select {
		case p, ok := <-frames:
			if !ok {
				_ = w.Close()
				return
			}
			if _, err := w.Write(p); err != nil {
				return // the exec ended
			}
		case <-ctx.Done():
			_ = w.CloseWithError(context.Cause(ctx))
			return
		}
	}
}

// leaveOnError is an output stream whose first failed write means the client
// has left: the exec is cancelled.
type leaveOnError struct {
	w      io.Writer
	cancel context.CancelCauseFunc
}

func (l *leaveOnError) Write(p []byte) (int, error) {
	n, err := l.w.Write(p)
	if err != nil {
		l.cancel(errClientLeft)
	}
	return n, err
}

// headerHas says whether the comma-separated header name has token.
func headerHas(h http.Header, name, token string) bool {
	for _, v := range h.Values(name) {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}
