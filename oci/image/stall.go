package image

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
)

// Defaults of a pull's progress deadline and overall bound.
const (
	// DefaultProgressTimeout is how long a response body (a manifest, the
	// image config, a layer) may be waited on while it brings less than
	// the minimum rate before its request is cancelled. containerd's
	// image_pull_progress_timeout is 5 minutes of no progress at all; an
	// appliance at boot cannot give a dead registry that long, and a
	// working one, even on a slow link, sends far more than the minimum
	// in a minute.
	DefaultProgressTimeout = time.Minute
	// DefaultMinProgressRate is the minimum rate, in bytes a second,
	// averaged over DefaultProgressTimeout of waiting: 1 KiB/s, below
	// any working link (a GPRS modem does 5). A registry that trickles
	// one byte every few seconds is cut after one window, not after the
	// whole blob.
	DefaultMinProgressRate = 1 << 10
	// DefaultPullTimeout bounds one pull, from its slot to its end,
	// whatever the rate: 30 minutes bring 1.8 GB at 1 MiB/s.
	DefaultPullTimeout = 30 * time.Minute
)

// maxStallLabel bounds the registry-chosen parts (a path, a host) of a
// stall error.
const maxStallLabel = 160

// StallError is a response body that brought less than the minimum rate:
// which blob or manifest, from which host, after how many bytes.
type StallError struct {
	What   string // "blob sha256:…", "manifest v1", "response /v2/"
	Host   string
	Read   int64
	Size   int64 // -1: not known
	Window time.Duration
	Min    int64 // bytes each Window must bring
}

func (e *StallError) Error() string {
	size := "?"
	if e.Size >= 0 {
		size = fmt.Sprint(e.Size)
	}
	return fmt.Sprintf("%s from %s stalled after %d of %s bytes: less than %d bytes in %v (image pull progress deadline)",
		e.What, e.Host, e.Read, size, e.Min, e.Window)
}

// stallWatch is the progress deadline of one endpoint's requests; a zero
// window watches nothing.
type stallWatch struct {
	window time.Duration
	rate   int64 // bytes a second
}

// watch gives resp a body that cancels r (through cancel) when it stalls;
// cancel is called when the body is closed too.
func (s stallWatch) watch(r *http.Request, resp *http.Response, cancel context.CancelCauseFunc) {
	minBytes := max(1, s.rate*int64(s.window)/int64(time.Second))
	resp.Body = &watchedBody{rc: resp.Body, cancel: cancel, window: s.window, min: minBytes,
		what: describe(r), host: bound(r.URL.Host), size: resp.ContentLength}
}

// watchedBody fails a body whose bytes come slower than min per window of
// time spent waiting in Read: the time its reader takes elsewhere (writing
// a layer to disk) does not count against the registry.
// (containerd's pullProgressReporter, per body and with a rate, not only
// "no byte at all".)
type watchedBody struct {
	rc     io.ReadCloser
	cancel context.CancelCauseFunc
	window time.Duration
	min    int64
	what   string
	host   string
	size   int64

	read   int64         // bytes so far
	got    int64         // bytes in this window
	waited time.Duration // time spent in Read in this window
	err    error         // set once stalled
}

func (b *watchedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	var fired atomic.Bool
	stall := &StallError{What: b.what, Host: b.host, Size: b.size, Window: b.window, Min: b.min}
	timer := time.AfterFunc(b.window-b.waited, func() {
		fired.Store(true)
		b.cancel(stall)
	})
	start := time.Now()
	n, err := b.rc.Read(p)
	timer.Stop()
	b.waited += time.Since(start)
	b.read += int64(n)
	b.got += int64(n)
	if err == io.EOF {
		return n, err
	}
	if fired.Load() || (b.got < b.min && b.waited >= b.window) {
		// Once fired, the request is cancelled: whatever this Read
		// brought, the next would fail.
		stall.Read = b.read
		b.cancel(stall)
		b.err = stall
		return n, stall
	}
	if b.got >= b.min {
		b.got, b.waited = 0, 0
	}
	return n, err
}

func (b *watchedBody) Close() error {
	err := b.rc.Close()
	b.cancel(nil)
	return err
}

// describe names what r fetches: the blob or manifest of the request the
// redirects started from, else its path.
func describe(r *http.Request) string {
	p := origin(r).URL.Path
	for _, kind := range []string{"blobs", "manifests"} {
		if i := strings.LastIndex(p, "/"+kind+"/"); i >= 0 {
			return strings.TrimSuffix(kind, "s") + " " + bound(p[i+len(kind)+2:])
		}
	}
	return "response " + bound(p)
}

// origin is the request the redirects that led to r started from.
func origin(r *http.Request) *http.Request {
	for i := 0; i < 20 && r.Response != nil && r.Response.Request != nil; i++ {
		r = r.Response.Request
	}
	return r
}

// redirects is how many redirects led to r.
func redirects(r *http.Request) int {
	n := 0
	for ; r.Response != nil && r.Response.Request != nil; r = r.Response.Request {
		n++
	}
	return n
}

// bound cuts a registry-chosen string at about maxStallLabel bytes, with
// what is not printable (a line break, a terminal escape, a bidi override
// from a token realm's or foreign layer's decoded path) escaped as Go does.
func bound(s string) string { return boundTo(s, maxStallLabel) }

// boundTo is bound, cut at about n bytes.
func boundTo(s string, n int) string {
	var b strings.Builder
	for _, r := range s {
		if b.Len() >= n {
			b.WriteString("...")
			break
		}
		if unicode.IsPrint(r) {
			b.WriteRune(r)
		} else {
			b.WriteString(strings.Trim(strconv.QuoteRune(r), "'"))
		}
	}
	return b.String()
}
