package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

// ExecProtocol is the Upgrade token of an exec connection. After the 101
// answer, both sides send frames: a stream byte, a big-endian uint32 length
// and that many bytes. The stream numbers are those of the kubelet's
// remotecommand channel protocol (v5.channel.k8s.io).
const ExecProtocol = "staticpodd-exec.v1"

// Streams of an exec connection.
const (
	StreamStdin  byte = 0 // client → daemon: input
	StreamStdout byte = 1 // daemon → client: output (all of it with a TTY)
	StreamStderr byte = 2 // daemon → client
	// StreamStatus is the daemon's last frame: an ExecStatus as JSON.
	StreamStatus byte = 3
	// StreamResize is client → daemon: a terminal size, width and height as
	// big-endian uint16s.
	StreamResize byte = 4
	// StreamClose is client → daemon: the stream in its one byte has ended
	// (StreamStdin: EOF).
	StreamClose byte = 255
)

// maxFrame bounds a frame's payload; longer writes are split.
const maxFrame = 32 << 10

// ExecStatus ends an exec: the command's exit code, or why it did not run
// (then ExitCode is 126 or 127 for a command that could not be executed or
// found, 1 otherwise).
type ExecStatus struct {
	ExitCode int    `json:"exitCode"`
	Error    string `json:"error,omitempty"`
}

// FrameWriter writes frames; it is safe for concurrent use.
type FrameWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf []byte // one frame, header and payload; guarded by mu
}

func NewFrameWriter(w io.Writer) *FrameWriter { return &FrameWriter{w: w} }

// WriteFrame writes p as frames of stream.
func (f *FrameWriter) WriteFrame(stream byte, p []byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for first := true; first || len(p) > 0; first = false {
		n := min(len(p), maxFrame)
		f.buf = append(f.buf[:0], stream, 0, 0, 0, 0)
		binary.BigEndian.PutUint32(f.buf[1:], uint32(n))
		f.buf = append(f.buf, p[:n]...)
		if _, err := f.w.Write(f.buf); err != nil {
			return err
		}
		p = p[n:]
	}
	return nil
}

// StreamWriter is an io.Writer of one stream.
func (f *FrameWriter) StreamWriter(stream byte) io.Writer {
	return streamWriter{f, stream}
}

type streamWriter struct {
	f      *FrameWriter
	stream byte
}

func (s streamWriter) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if err := s.f.WriteFrame(s.stream, p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// errFrameTooLong: a peer sent more than maxFrame in a frame.
var errFrameTooLong = errors.New("exec frame too long")

// ReadFrame reads one frame; its payload is only valid until the next call
// with buf, which must hold maxFrame bytes.
func ReadFrame(r io.Reader, buf []byte) (stream byte, payload []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxFrame || int(n) > len(buf) {
		return 0, nil, fmt.Errorf("%w: %d bytes", errFrameTooLong, n)
	}
	if _, err := io.ReadFull(r, buf[:n]); err != nil {
		return 0, nil, fmt.Errorf("read exec frame: %w", io.ErrUnexpectedEOF)
	}
	return hdr[0], buf[:n], nil
}

// FrameBuffer returns a buffer for ReadFrame.
func FrameBuffer() []byte { return make([]byte, maxFrame) }
