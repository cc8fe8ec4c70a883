package mirror

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// hostileBytes is how much of one endless object the hostile API server
// sends before it gives up: eight times responseLimit, sixteen times
// watchEventLimit.
const hostileBytes = 256 << 20

// writeEndless writes prefix and then an endless JSON string's bytes, until
// the client goes or hostileBytes were sent.
func writeEndless(w http.ResponseWriter, prefix string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := w.Write([]byte(prefix)); err != nil {
		return
	}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for sent := 0; sent < hostileBytes; sent += len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}

// An API server that answers the Node's list, then its watch, each with one
// endless object grows the daemon's heap only up to the bounds: each is
// refused with an error naming its bound, logged, and the daemon lists
// again after a back-off, and takes the Node of an honest answer.
func TestEndlessObjectsFromTheAPIServerBounded(t *testing.T) {
	var lists atomic.Int32
	relisted := make(chan struct{})
	const node = `{"metadata":{"name":"node1","resourceVersion":"1"}}`
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/nodes" {
			http.NotFound(w, r)
			return
		}
		if r.URL.Query().Get("watch") == "true" {
			writeEndless(w, `{"type":"ADDED","object":{"kind":"Node","apiVersion":"v1","metadata":{"name":"node1","annotations":{"a":"`)
			return
		}
		switch lists.Add(1) {
		case 1:
			writeEndless(w, `{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"node1","annotations":{"a":"`)
			return
		case 3:
			close(relisted)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},"items":[%s]}`, node)
	}))
	defer srv.Close()
	client, err := newRESTAPI(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	m := New(Config{NodeName: "node1"}, newFakePods(), slog.New(slog.NewTextHandler(&logs, nil)))

	// The heap measured is what the reads hold, not the garbage the
	// collector's pacing leaves, which grows with whatever earlier tests
	// keep: collected once it is a tenth of the heap.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	sampled := make(chan struct{})
	stopSampling := make(chan struct{})
	go func() {
		defer close(sampled)
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			if ms.HeapAlloc > peak.Load() {
				peak.Store(ms.HeapAlloc)
			}
			select {
			case <-stopSampling:
				return
			case <-t.C:
			}
		}
	}()

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.watchNode(ctx, client)
	}()
	select {
	case <-relisted:
	case <-time.After(time.Minute):
		t.Error("no list again after the endless list and the endless watch")
	}
	cancel()
	<-done
	close(stopSampling)
	<-sampled

	grew := (int64(peak.Load()) - int64(base)) >> 20
	t.Logf("heap grew by %d MiB at most (bounds: response %d MiB, watch event %d MiB; the server sent up to %d MiB each)",
		grew, responseLimit>>20, watchEventLimit>>20, hostileBytes>>20)
	// io.ReadAll's buffer at the bound and the one before it while copied
	// into it (it grows by a quarter), and a tenth more of garbage.
	// Without the bounds: gigabytes. Under the race detector (114 MiB seen)
	// the growth is logged only; the refusals below are checked either way.
	if max := 3 * responseLimit >> 20; grew > max && !raceEnabled {
		t.Errorf("heap grew by %d MiB reading endless objects, want at most %d MiB", grew, max)
	}
	out := logs.String()
	for _, want := range []string{
		"response to GET /api/v1/nodes exceeds 32 MiB: refused",
		"an event of the API server's watch GET /api/v1/nodes exceeds 16 MiB: refused",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no log line with %q:\n%s", want, out)
		}
	}
	m.nodeMu.Lock()
	known := m.node
	m.nodeMu.Unlock()
	if known == nil || known.Name != "node1" {
		t.Errorf("node known after the honest list: %v, want node1", known)
	}
}

// The watch's bound counts each event alone, whatever its strings hold
// (braces, escaped quotes) and wherever its whitespace is, counts the
// whitespace before an event as the event's (client-go's decoder holds it
// with the event: endless whitespace would grow it without end), and
// counts a bare value at the top level too.
func TestWatchEventBoundFollowsJSON(t *testing.T) {
	defer func(l int64) { watchEventLimit = l }(watchEventLimit)
	watchEventLimit = 40
	for _, c := range []struct {
		stream string
		ok     bool
	}{
		{`{"a":"}}}}}}}}}}}}}}}}}}}"}` + "\n" + `{"b":"\"}{\"{[[[[[[[["}` + "\n" + `{"c":1}`, true},
		{strings.Repeat(`{"a":"0123456789012345678901234567"}`+"\n", 100), true},
		{"{\n\n\n" + `"a":  "0123456789012345678901234567890123456789"` + "\n}", false},
		{`{"a":"x"}` + `"` + strings.Repeat("x", 100) + `"`, false},
		{`{"a":"x"} ` + strings.Repeat("1", 100), false},
		{`{"a":"\"}` + strings.Repeat("x", 100) + `"}`, false},
		// Whitespace between events is held by client-go's decoder with
		// the next event, so it counts as that event's.
		{`{"a":"x"}` + strings.Repeat(" ", 100), false},
		{`{"a":"x"}` + strings.Repeat("\n", 100) + `{"b":1}`, false},
	} {
		j := &jsonEvents{ReadCloser: io.NopCloser(strings.NewReader(c.stream)), what: "GET /x"}
		_, err := io.Copy(io.Discard, j)
		if got := err == nil; got != c.ok {
			t.Errorf("stream %.50q: err %v, want ok %v", c.stream, err, c.ok)
		}
	}
}
