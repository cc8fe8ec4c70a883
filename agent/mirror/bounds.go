package mirror

import (
	"fmt"
	"io"
	"mime"
	"net/http"
)

// What the daemon reads from the API server is bounded: a broken or hostile
// server could otherwise grow its memory without end with one endless
// response or watch event. client-go reads a response whole (io.ReadAll in
// rest.Request.transformResponse, also for a failed watch's error), and its
// JSON watch framer (apimachinery's framer.jsonFrameReader) decodes each
// event whole into a json.RawMessage before the streaming decoder's own
// 16 MiB bound on a frame sees it; neither is bounded.
//
// The bounds are far beyond any real object's: etcd refuses an object over
// 1.5 MiB (--max-request-bytes), the API server a written body over 3 MiB,
// and a real pod is a few to tens of KiB in JSON. Vars for the tests.
var (
	// watchEventLimit bounds one event of a JSON watch: the streaming
	// decoder's own bound on a frame, which refuses a larger one anyway
	// (after reading it), so no event accepted before is refused now.
	watchEventLimit int64 = 16 << 20
	// responseLimit bounds a whole response but a JSON watch's: the
	// largest is a page of listPageSize pods, 320 KiB a pod at this bound,
	// more than the API server lets a pod's annotations hold (256 KiB).
	responseLimit int64 = 32 << 20
)

// boundResponses wraps rt so that every response body read through it is
// bounded: a JSON watch by watchEventLimit an event, any other response by
// responseLimit in all. Past its bound a body's Read fails with an error
// naming it, and client-go closes it, and so the connection.
func boundResponses(rt http.RoundTripper) http.RoundTripper { return boundedResponses{rt} }

type boundedResponses struct{ rt http.RoundTripper }

func (b boundedResponses) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := b.rt.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	what := req.Method + " " + req.URL.Path
	if isWatch(req) && resp.StatusCode == http.StatusOK && isJSON(resp) {
		resp.Body = &jsonEvents{ReadCloser: resp.Body, what: what}
	} else {
		// Also a watch in another type than the JSON asked for: no real
		// server sends one, so it needs no frames of its own.
		resp.Body = &limitedBody{ReadCloser: resp.Body, what: what, left: responseLimit}
	}
	return resp, nil
}

// isWatch: req is a watch, as client-go writes one (rest.Request.Watch).
func isWatch(req *http.Request) bool { return req.URL.Query().Get("watch") == "true" }

func isJSON(resp *http.Response) bool {
	t, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return err == nil && t == "application/json"
}

// limitedBody fails its Read past left bytes.
type limitedBody struct {
	io.ReadCloser
	what string
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the API server's response to %s exceeds %d MiB: refused", b.what, responseLimit>>20)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// jsonEvents fails its Read once one JSON value of the stream (an event)
// exceeds watchEventLimit. It follows the values' structure (strings,
// their escapes, nesting), not lines: JSON may hold any whitespace, so
// only a value's end ends what is counted. The whitespace before a value
// is counted as the value's: client-go's framer (encoding/json's Decoder)
// holds it with the value. That framer buffers the current value and at
// most one read past it, so its memory stays within about twice the bound.
type jsonEvents struct {
	io.ReadCloser
	what string
	// n is the bytes of the current value so far, with the whitespace
	// before it; depth, inString, escaped and bare (a number or literal at
	// the top level) where the scan is in it.
	n                       int64
	depth                   int
	inString, escaped, bare bool
}

func (j *jsonEvents) Read(p []byte) (int, error) {
	n, err := j.ReadCloser.Read(p)
	for i, c := range p[:n] {
		j.n++
		switch {
		case j.inString:
			switch {
			case j.escaped:
				j.escaped = false
			case c == '\\':
				j.escaped = true
			case c == '"':
				j.inString = false
				if j.depth == 0 {
					j.n = 0
				}
			}
		case c == '"':
			j.inString, j.bare = true, false
		case c == '{' || c == '[':
			j.depth++
			j.bare = false
		case c == '}' || c == ']':
			// An unbalanced one is the decoder's error to give.
			if j.depth--; j.depth <= 0 {
				j.depth, j.n = 0, 0
			}
		case j.depth == 0 && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			// Ends a bare value; else before the next value, and its.
			if j.bare {
				j.bare, j.n = false, 0
			}
		case j.depth == 0:
			j.bare = true
		}
		if j.n > watchEventLimit {
			return i, fmt.Errorf("an event of the API server's watch %s exceeds %d MiB: refused", j.what, watchEventLimit>>20)
		}
	}
	return n, err
}
