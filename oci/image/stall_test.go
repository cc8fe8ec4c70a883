package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// trickle makes reg send the blob digest (of content blob; or the manifest
// if digest is "manifests/TAG") one byte every
// every, with its full Content-Length, and hold back its last byte until
// the client goes; started is closed at the first byte. Other requests are
// served as usual.
func trickle(reg *testRegistry, digest string, blob []byte, every time.Duration, started chan<- struct{}) {
	var once atomic.Bool
	f := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.Method != http.MethodGet || !(strings.HasSuffix(req.URL.Path, "/blobs/"+digest) || strings.HasSuffix(req.URL.Path, "/"+digest)) {
			next.ServeHTTP(w, req)
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(blob)))
		w.WriteHeader(http.StatusOK)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := 0; ; i++ {
			if i < len(blob)-1 {
				if _, err := w.Write(blob[i : i+1]); err != nil {
					return
				}
			}
			w.(http.Flusher).Flush()
			if once.CompareAndSwap(false, true) && started != nil {
				close(started)
			}
			select {
			case <-req.Context().Done():
				return
			case <-tick.C:
			}
		}
	}
	reg.wrap.Store(&f)
}

// lastBlob is the digest and the content of img's last layer, as the
// registry serves it.
func lastBlob(t *testing.T, img v1.Image) (string, []byte) {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	l := ls[len(ls)-1]
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return d.String(), b
}

// A layer that trickles one byte every 20 ms fails the pull after one
// progress window, naming the blob, the host and the bytes it brought; the
// slot is given back.
func TestPullStalledBlobFails(t *testing.T) {
	reg := newTestRegistry(t, false)
	img := testImage(t)
	reg.push(t, "team/slow:v1", img)
	digest, blob := lastBlob(t, img)
	trickle(reg, digest, blob, 20*time.Millisecond, nil)
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts, MaxParallel: 1, ProgressTimeout: 300 * time.Millisecond}, discardLogger())
	// The bound of the test, not of the product: without a progress
	// deadline the pull would go on until it.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	began := time.Now()
	_, err := p.Pull(ctx, reg.host+"/team/slow:v1", nil)
	took := time.Since(began)
	var se *StallError
	if !errors.As(err, &se) {
		t.Fatalf("pull after %v: err = %v, want a StallError", took, err)
	}
	msg := err.Error()
	for _, want := range []string{"blob " + digest, "from " + reg.host, "stalled after ", fmt.Sprintf(" of %d bytes", len(blob)), "less than 307 bytes in 300ms"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q does not say %q", msg, want)
		}
	}
	if se.Read < 1 || se.Read > 100 {
		t.Errorf("stalled after %d bytes, want the few the trickle sent", se.Read)
	}
	if took > 5*time.Second {
		t.Errorf("the stall took %v to be noticed, want about 300ms", took)
	}
	t.Logf("stalled pull failed after %v: %v", took.Round(time.Millisecond), err)
	// The slot is free again: another pull of the registry goes.
	reg.wrap.Store(nil)
	if _, err := p.Pull(ctx, reg.host+"/team/slow:v1", nil); err != nil {
		t.Fatalf("pull after the stall: %v", err)
	}
}

// A manifest that trickles fails the same way, naming it.
func TestPullStalledManifestFails(t *testing.T) {
	reg := newTestRegistry(t, false)
	img := testImage(t)
	reg.push(t, "team/slowm:v1", img)
	raw, err := img.RawManifest()
	if err != nil {
		t.Fatal(err)
	}
	trickle(reg, "manifests/v1", raw, 20*time.Millisecond, nil)
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts, ProgressTimeout: 300 * time.Millisecond}, discardLogger())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err = p.Pull(ctx, reg.host+"/team/slowm:v1", nil)
	var se *StallError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "manifest v1 from "+reg.host+" stalled after ") {
		t.Fatalf("err = %v, want the manifest's StallError", err)
	}
}

// A body that keeps its rate passes however long it takes: the deadline is
// on progress, not on the body's whole time.
func TestPullSlowButSteadyPasses(t *testing.T) {
	reg := newTestRegistry(t, false)
	img := testImage(t)
	reg.push(t, "team/steady:v1", img)
	var slow atomic.Int64
	f := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
			slow.Add(1)
			// 64 bytes a write every 10 ms: above 307 bytes in 300ms.
			next.ServeHTTP(&pacedWriter{ResponseWriter: w, chunk: 64, every: 10 * time.Millisecond}, req)
			return
		}
		next.ServeHTTP(w, req)
	}
	reg.wrap.Store(&f)
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts, ProgressTimeout: 300 * time.Millisecond}, discardLogger())
	if _, err := p.Pull(t.Context(), reg.host+"/team/steady:v1", nil); err != nil {
		t.Fatal(err)
	}
	if slow.Load() == 0 {
		t.Fatal("no blob went through the paced writer")
	}
}

// pacedWriter writes chunk bytes every every.
type pacedWriter struct {
	http.ResponseWriter
	chunk int
	every time.Duration
}

func (w *pacedWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		c := min(w.chunk, len(b))
		m, err := w.ResponseWriter.Write(b[:c])
		n += m
		if err != nil {
			return n, err
		}
		w.ResponseWriter.(http.Flusher).Flush()
		b = b[c:]
		time.Sleep(w.every) // the registry's pace, not a wait of the test
	}
	return n, nil
}

// With serializeImagePulls (one slot), a pull stalled on one registry
// holds back neither a pull from another registry nor a critical pull from
// its own; a non-critical pull from its own waits for it.
func TestPullStallHoldsOnlyItsRegistry(t *testing.T) {
	slow, other := newTestRegistry(t, false), newTestRegistry(t, false)
	stuck := testImage(t)
	slow.push(t, "team/stuck:v1", stuck)
	// Images of their own layers: nothing of them is the stalled blob.
	critical := testImage(t, []entry{{name: "critical.txt", body: "critical"}})
	slow.push(t, "team/critical:v1", critical)
	queued := testImage(t, []entry{{name: "queued.txt", body: "queued"}})
	slow.push(t, "team/queued:v1", queued)
	elsewhere := testImage(t, []entry{{name: "other.txt", body: "other"}})
	other.push(t, "team/other:v1", elsewhere)
	started := make(chan struct{})
	digest, blob := lastBlob(t, stuck)
	trickle(slow, digest, blob, 50*time.Millisecond, started)
	var queuedAsked atomic.Int64
	inner := *slow.wrap.Load()
	f := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if strings.Contains(req.URL.Path, "/team/queued/") {
			queuedAsked.Add(1)
		}
		inner(w, req, next)
	}
	slow.wrap.Store(&f)
	hosts := t.TempDir()
	writeHosts(t, hosts, slow.host, fmt.Sprintf("server = %q\n", "http://"+slow.host))
	writeHosts(t, hosts, other.host, fmt.Sprintf("server = %q\n", "http://"+other.host))
	// A progress deadline far beyond the test: the stall lasts throughout.
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts, MaxParallel: 1, ProgressTimeout: time.Hour}, discardLogger())

	stuckCtx, stopStuck := context.WithCancel(t.Context())
	stuckErr := make(chan error, 1)
	go func() {
		_, err := p.Pull(stuckCtx, slow.host+"/team/stuck:v1", nil)
		stuckErr <- err
	}()
	select {
	case <-started:
	case err := <-stuckErr:
		t.Fatalf("the stalled pull ended before it stalled: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the stalled pull never reached its blob")
	}
	queuedErr := make(chan error, 1)
	go func() {
		_, err := p.Pull(t.Context(), slow.host+"/team/queued:v1", nil)
		queuedErr <- err
	}()

	// Bounds of the test: the current pulls must not wait on the stall.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	began := time.Now()
	if _, err := p.Pull(ctx, other.host+"/team/other:v1", nil); err != nil {
		t.Fatalf("pull from another registry while one stalls: %v", err)
	}
	t.Logf("pull from another registry: %v", time.Since(began).Round(time.Millisecond))
	began = time.Now()
	if _, err := p.PullWith(ctx, slow.host+"/team/critical:v1", PullOptions{Critical: true}); err != nil {
		t.Fatalf("critical pull from the stalled registry: %v", err)
	}
	t.Logf("critical pull from the stalled registry: %v", time.Since(began).Round(time.Millisecond))

	select {
	case err := <-queuedErr:
		t.Fatalf("a non-critical pull from the stalled registry did not wait for its slot: %v", err)
	default:
	}
	if n := queuedAsked.Load(); n != 0 {
		t.Fatalf("the registry was asked %d times for the queued image while its slot was held", n)
	}
	stopStuck()
	if err := <-stuckErr; err == nil {
		t.Fatal("the stalled pull succeeded")
	}
	if err := <-queuedErr; err != nil {
		t.Fatalf("queued pull after the slot came free: %v", err)
	}
}

// A critical pull that joins a pull of the same image still waiting for a
// slot makes it go at once.
func TestPullCriticalJoinPromotes(t *testing.T) {
	slow := newTestRegistry(t, false)
	stuck := testImage(t)
	slow.push(t, "team/stuck:v1", stuck)
	shared := testImage(t, []entry{{name: "shared.txt", body: "shared"}})
	slow.push(t, "team/shared:v1", shared)
	started := make(chan struct{})
	digest, blob := lastBlob(t, stuck)
	trickle(slow, digest, blob, 50*time.Millisecond, started)
	var sharedAsked atomic.Int64
	inner := *slow.wrap.Load()
	f := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if strings.Contains(req.URL.Path, "/team/shared/") {
			sharedAsked.Add(1)
		}
		inner(w, req, next)
	}
	slow.wrap.Store(&f)
	hosts := t.TempDir()
	writeHosts(t, hosts, slow.host, fmt.Sprintf("server = %q\n", "http://"+slow.host))
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts, MaxParallel: 1, ProgressTimeout: time.Hour}, discardLogger())
	stuckCtx, stopStuck := context.WithCancel(t.Context())
	defer stopStuck()
	go p.Pull(stuckCtx, slow.host+"/team/stuck:v1", nil)
	<-started
	waitingErr := make(chan error, 1)
	go func() {
		_, err := p.Pull(t.Context(), slow.host+"/team/shared:v1", nil)
		waitingErr <- err
	}()
	// The non-critical pull is in flight (waiting) once a second caller
	// would join it: wait until the puller has it.
	for {
		p.mu.Lock()
		_, ok := p.inflight[slow.host+"/team/shared:v1"]
		p.mu.Unlock()
		if ok {
			break
		}
		time.Sleep(time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := p.PullWith(ctx, slow.host+"/team/shared:v1", PullOptions{Critical: true}); err != nil {
		t.Fatalf("critical pull joining a waiting one: %v", err)
	}
	if err := <-waitingErr; err != nil {
		t.Fatalf("the joined pull: %v", err)
	}
	if sharedAsked.Load() == 0 {
		t.Fatal("the registry was never asked for the shared image")
	}
}

// A pull that keeps above the minimum rate still ends at PullTimeout.
func TestPullOverallBound(t *testing.T) {
	reg := newTestRegistry(t, false)
	img := testImage(t)
	reg.push(t, "team/long:v1", img)
	digest, blob := lastBlob(t, img)
	trickle(reg, digest, blob, 20*time.Millisecond, nil)
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts, MaxParallel: 1, ProgressTimeout: time.Hour, PullTimeout: 500 * time.Millisecond}, discardLogger())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := p.Pull(ctx, reg.host+"/team/long:v1", nil)
	if err == nil || !strings.Contains(err.Error(), "pull not done after 500ms") {
		t.Fatalf("err = %v, want the pull's overall bound", err)
	}
}
