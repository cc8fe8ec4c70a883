package podspec

import (
	"bytes"
	"unicode/utf8"
)

// Bounds of the strings a container, an image, a registry, a server or a
// plugin decides, applied before they are kept, logged, recorded in an event
// or shown in a status; docs/security.md lists each string and its bound.
const (
	// MaxOutput is what is kept of a probe's or a hook's output: a response
	// body, an exec's output, a gRPC status message (the kubelet's
	// maxRespBodyLength and exec maxReadLength).
	MaxOutput = 10 << 10
	// MaxEventMessage is what an event's message keeps: an API server
	// refuses a longer one (validation.NoteLengthLimit; the scheduler's
	// truncateMessage cuts to it).
	MaxEventMessage = 1 << 10
	// MaxStatusMessage is what a container's waiting message keeps: the
	// error that keeps it from running, which may quote a registry's,
	// a plugin's or a hook's answer.
	MaxStatusMessage = MaxTerminationMessage
)

// Truncate returns s cut to at most n bytes, on a UTF-8 boundary.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// LimitWriter keeps the first N bytes written to it and drops the rest; it
// never fails, so a command writing to it is never stopped by it.
type LimitWriter struct {
	N   int
	buf bytes.Buffer
}

func (w *LimitWriter) Write(p []byte) (int, error) {
	if room := w.N - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(room, len(p))])
	}
	return len(p), nil
}

// String is what was kept.
func (w *LimitWriter) String() string { return w.buf.String() }
