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

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/describe"
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
		spec, ok := execRequest(w, r)
		if !ok {
			return
		}
		ns, pod, ctr := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
		id, err := a.ExecTarget(ns, pod, ctr)
		if err != nil {
			http.Error(w, err.Error(), errorCode(err))
			return
		}
		streamExec(w, r, spec, logger.With("pod", ns+"/"+pod, "container", ctr), "exec ended", "",
			func(ctx context.Context, spec podspec.ExecSpec) (int, error) { return a.Exec(ctx, id, spec) })
	}
}

// NoteHeader is the header of an exec's 101 answer that carries kubectl's
// note on the container it chose ("Defaulted container ...").
const NoteHeader = "Staticpodd-Note"

// podExecTargeter is an Agent whose ExecTarget can take the pod it found in
// Pods, instead of listing (copying) every pod again to find it.
type podExecTargeter interface {
	ExecTargetOf(pod *v1.Pod, container string) (string, error)
}

// execByNameHandler serves POST /exec?pod=NAME, staticpodd exec's one
// request: execHandler's query, with &namespace= and &container= optional.
// The pod is the one NAME names as the CLI shows it (describe.Find: the
// pod's name, its manifest's, either as namespace/name), the container the
// one kubectl would pick (describe.ExecContainer), and its note, if any,
// comes in the 101 answer's NoteHeader. Finding them here, not in the CLI,
// spares the CLI a second request and decoding every pod of the node.
func execByNameHandler(a Agent, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		spec, ok := execRequest(w, r)
		if !ok {
			return
		}
		q := r.URL.Query()
		if q.Get("pod") == "" {
			http.Error(w, "exec: no pod", http.StatusBadRequest)
			return
		}
		pod, err := describe.Find(a.Pods(), q.Get("pod"), q.Get("namespace"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		ctr, note, err := describe.ExecContainer(pod, q.Get("container"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		}
		var id string
		if t, ok := a.(podExecTargeter); ok {
			id, err = t.ExecTargetOf(pod, ctr)
		} else {
			id, err = a.ExecTarget(pod.Namespace, pod.Name, ctr)
		}
		if err != nil {
			http.Error(w, err.Error(), errorCode(err))
			return
		}
		streamExec(w, r, spec, logger.With("pod", pod.Namespace+"/"+pod.Name, "container", ctr), "exec ended", note,
			func(ctx context.Context, spec podspec.ExecSpec) (int, error) { return a.Exec(ctx, id, spec) })
	}
}

// debugHandler serves POST /debug/{namespace}/{pod}, staticpodd debug: the
// query of an exec with &image= (the debug container's image) and
// &target= (the container whose PID namespace it joins). It answers as
// exec does, 400 for a request that cannot be run and 429 when the pod or
// the node runs as many debug containers as it may; the debug container
// is gone when the connection ends.
func debugHandler(a Agent, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		spec, ok := execRequest(w, r)
		if !ok {
			return
		}
		q := r.URL.Query()
		ns, pod := r.PathValue("namespace"), r.PathValue("pod")
		req := podspec.DebugRequest{Image: q.Get("image"), Target: q.Get("target"), Cmd: spec.Cmd,
			Stdin: q.Get("stdin") == "true", TTY: spec.TTY}
		run, err := a.Debug(ns, pod, req)
		if err != nil {
			http.Error(w, err.Error(), errorCode(err))
			return
		}
		streamExec(w, r, spec, logger.With("pod", ns+"/"+pod, "image", req.Image, "target", req.Target), "debug container ended", "", run)
	}
}

// errorCode is the HTTP status of an error found before a command runs.
func errorCode(err error) int {
	switch {
	case errors.Is(err, podspec.ErrNotExist):
		return http.StatusNotFound
	case errors.Is(err, podspec.ErrNotRunning):
		return http.StatusConflict
	case errors.Is(err, podspec.ErrDebugInvalid):
		return http.StatusBadRequest
	case errors.Is(err, podspec.ErrDebugLimit):
		return http.StatusTooManyRequests
	}
	return http.StatusInternalServerError
}

// execRequest checks that r asks to upgrade to ExecProtocol and returns the
// process its query asks for, without its streams; when it cannot, it
// answered r and returns false.
func execRequest(w http.ResponseWriter, r *http.Request) (podspec.ExecSpec, bool) {
	if !headerHas(r.Header, "Connection", "upgrade") || !strings.EqualFold(r.Header.Get("Upgrade"), ExecProtocol) {
		http.Error(w, "exec needs Connection: Upgrade and Upgrade: "+ExecProtocol, http.StatusUpgradeRequired)
		return podspec.ExecSpec{}, false
	}
	q := r.URL.Query()
	spec := podspec.ExecSpec{Cmd: q["command"], TTY: q.Get("tty") == "true"}
	if len(spec.Cmd) == 0 {
		http.Error(w, "exec: no command", http.StatusBadRequest)
		return spec, false
	}
	for _, kv := range q["env"] {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			http.Error(w, "exec: env "+strconv.Quote(kv)+" is not NAME=value", http.StatusBadRequest)
			return spec, false
		}
		spec.Env = append(spec.Env, podspec.EnvVar{Name: name, Value: value})
	}
	if spec.TTY {
		width, _ := strconv.ParseUint(q.Get("width"), 10, 16)
		height, _ := strconv.ParseUint(q.Get("height"), 10, 16)
		spec.Size = podspec.TermSize{Width: uint16(width), Height: uint16(height)}
	}
	return spec, true
}

// streamExec upgrades the connection of r and runs spec through run, with
// the connection's frames as its streams, until it exits or the client
// leaves; then it sends the ExecStatus, and logs msg. A note other than ""
// goes in the 101 answer's NoteHeader, its control characters dropped.
func streamExec(w http.ResponseWriter, r *http.Request, spec podspec.ExecSpec, logger *slog.Logger, msg, note string,
	run func(ctx context.Context, spec podspec.ExecSpec) (int, error)) {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		cancel(err)
		_, _ = run(ctx, spec) // gives back what it holds
		http.Error(w, "exec: "+err.Error(), http.StatusInternalServerError)
		return
	}
	defer conn.Close()
	// The server's timeouts are for requests; the exec lasts as long
	// as its command.
	_ = conn.SetDeadline(time.Time{})
	_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + ExecProtocol + "\r\n")
	if note = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return -1
		}
		return r
	}, note); note != "" {
		_, _ = brw.WriteString(NoteHeader + ": " + note + "\r\n")
	}
	_, _ = brw.WriteString("\r\n")
	if err := brw.Flush(); err != nil {
		cancel(errClientLeft)
		_, _ = run(ctx, spec)
		return
	}

	out := NewFrameWriter(conn)
	spec.Stdout = &leaveOnError{out.StreamWriter(StreamStdout), cancel}
	spec.Stderr = &leaveOnError{out.StreamWriter(StreamStderr), cancel}
	var stdin *io.PipeReader
	stdinFrames := make(chan []byte, stdinQueue)
	var stdinW *io.PipeWriter
	if r.URL.Query().Get("stdin") == "true" {
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
	code, err := run(ctx, spec)
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
	attrs := []any{"command", spec.Cmd[0], "exitCode", st.ExitCode, "duration", time.Since(begin)}
	if err != nil {
		attrs = append(attrs, "err", err)
	}
	logger.Info(msg, attrs...)
	if context.Cause(ctx) != nil {
		return // the client left
	}
	b, _ := json.Marshal(st)
	_ = out.WriteFrame(StreamStatus, b)
}

// StartExec sends the exec request for path (/exec..., with its query) over
// conn and reads the answer. On 101 it returns the reader of the frames that
// follow and the answer's header; otherwise an error saying what the daemon
// answered.
func StartExec(conn io.ReadWriter, path string) (*bufio.Reader, http.Header, error) {
	req, err := http.NewRequest(http.MethodPost, "http://staticpodd"+path, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", ExecProtocol)
	if err := req.Write(conn); err != nil {
		return nil, nil, fmt.Errorf("send exec request: %w", err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		return nil, nil, fmt.Errorf("read exec answer: %w", err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, nil, &RefusedError{Code: resp.StatusCode, Msg: strings.TrimSpace(string(body))}
	}
	return br, resp.Header, nil
}

// RefusedError is an exec the daemon answered with other than 101: its
// status, and the message it gave.
type RefusedError struct {
	Code int
	Msg  string
}

func (e *RefusedError) Error() string { return e.Msg }

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
