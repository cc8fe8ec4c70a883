package podspec

import (
	"bytes"
	"fmt"
	"strconv"
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

// MaxShown is how much of a bad value an error shows (a manifest's field, an
// image's Entrypoint or user): enough to recognise it, never a whole file's
// worth.
const MaxShown = 120

// Shorten is s for an error: its first MaxShown bytes, on a UTF-8 boundary,
// and its length when it is longer.
func Shorten(s string) string {
	if len(s) <= MaxShown {
		return s
	}
	return Truncate(s, MaxShown) + fmt.Sprintf("… (%d bytes)", len(s))
}

// Quote is Shorten with what is kept quoted (invalid UTF-8 and control
// characters escaped) and the length outside the quotes.
func Quote(s string) string {
	if len(s) <= MaxShown {
		return strconv.Quote(s)
	}
	return strconv.Quote(Truncate(s, MaxShown)) + fmt.Sprintf("… (%d bytes)", len(s))
}

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
