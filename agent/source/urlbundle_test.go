package source

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// tarOf is a tar of one file named name holding data.
func tarOf(t *testing.T, name, data string) string {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(data))}); err != nil {
		t.Fatal(err)
	}
	tw.Write([]byte(data))
	tw.Close()
	return b.String()
}

// fakeApplier records the bundles the URL source hands it: each staged
// file's content, read while it is there.
type fakeApplier struct {
	mu      sync.Mutex
	applied []string
	err     error
}

func (f *fakeApplier) apply(_ context.Context, path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, string(b))
	return f.err
}

func (f *fakeApplier) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.applied)
}

// A URL that serves a bundle hands it to the applier, staged whole in a
// file of its own bound, once per digest, across a restart too; the URL's
// own set is then empty; a refusal is the URL's problem; a manifest
// served again is read anew, and a bundle after it applied again.
func TestURLServesABundle(t *testing.T) {
	s, srv := newServed(t, 200, urlPod("web", "busybox"))
	dir := t.TempDir()
	f := &fakeApplier{}
	cfg := URLConfig{URL: srv.URL + "/pods", Period: fast, SaveFile: filepath.Join(dir, "url", "last-good"),
		Bundle: &URLBundle{Stage: BundleStage{Dir: filepath.Join(dir, "url"), MaxBytes: 1 << 20, Timeout: time.Minute}, Apply: f.apply}}
	r := startURL(t, cfg)
	r.waitFor(t, "web", withPods("web-node1"))

	bundleA := tarOf(t, "index.json", `{"a":1}`)
	s.set(200, bundleA)
	r.waitFor(t, "no pods once the bundle is applied", withPods())
	n := s.hits.Load()
	s.waitHits(t, n+3)
	if f.count() != 1 || f.applied[0] != bundleA {
		t.Fatalf("applied %d bundles, want bundle A once", f.count())
	}
	waitNoStaged(t, filepath.Join(dir, "url"))

	// Restarted: the same bundle is not applied again (it may have been
	// rolled back since), and the URL's saved set is empty.
	r.stop()
	r = startURL(t, cfg)
	if u := r.next(t); len(u.Pods) != 0 {
		t.Fatalf("after a restart: pods %v, want none", podNames(u))
	}
	n = s.hits.Load()
	s.waitHits(t, n+3)
	if f.count() != 1 {
		t.Fatalf("bundle A applied again after a restart")
	}

	// A gzipped bundle that is refused: the URL's problem, nothing runs
	// from it; not applied again while it is served.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write([]byte(tarOf(t, "index.json", `{"b":1}`)))
	zw.Close()
	f.mu.Lock()
	f.err = errors.New("SignatureValidationFailed: no signature")
	f.mu.Unlock()
	s.set(200, gz.String())
	r.waitFor(t, "the refusal", hasProblem("SignatureValidationFailed: no signature"))
	n = s.hits.Load()
	s.waitHits(t, n+3)
	if f.count() != 2 {
		t.Fatalf("applied %d times, want the refused bundle tried once", f.count())
	}

	// A manifest again, then bundle A again: applied again.
	f.mu.Lock()
	f.err = nil
	f.mu.Unlock()
	s.set(200, urlPod("web", "busybox"))
	r.waitFor(t, "web again", withPods("web-node1"))
	s.set(200, bundleA)
	r.waitFor(t, "no pods once the bundle is applied again", withPods())
	if f.count() != 3 {
		t.Fatalf("applied %d times, want bundle A again", f.count())
	}
}

// A bundle is bounded by its own limit, not a manifest's; past it, the
// download is cut off and nothing applied. The media type alone makes a
// body a bundle.
func TestURLBundleBounds(t *testing.T) {
	s, srv := newServed(t, 200, "")
	f := &fakeApplier{}
	dir := t.TempDir()
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast,
		Bundle: &URLBundle{Stage: BundleStage{Dir: dir, MaxBytes: 4096, Timeout: time.Minute}, Apply: f.apply}})
	r.next(t)
	s.set(200, tarOf(t, "blob", strings.Repeat("x", 8192)))
	r.waitFor(t, "the bound", hasProblem("larger than 4096 bytes"))
	if f.count() != 0 {
		t.Fatalf("a bundle over the bound was applied")
	}
	waitNoStaged(t, dir)

	s.setHandler(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", MediaTypeLayoutTar)
		w.Write([]byte("not a tar, but said to be a layout"))
	})
	r.waitFor(t, "a bundle by its media type", withPods())
	if f.count() != 1 {
		t.Fatalf("the body served as %s was not handed to the applier", MediaTypeLayoutTar)
	}
}

// A bundle is bounded by the room its filesystem has above its reserve
// too: a server does not fill the node's disk with a body under MaxBytes.
func TestURLBundleRoom(t *testing.T) {
	s, srv := newServed(t, 200, "")
	f := &fakeApplier{}
	dir := t.TempDir()
	room := func() (int64, error) { return 4096, nil }
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast,
		Bundle: &URLBundle{Stage: BundleStage{Dir: dir, MaxBytes: 1 << 30, Timeout: time.Minute, Room: room}, Apply: f.apply}})
	r.next(t)
	s.set(200, tarOf(t, "blob", strings.Repeat("x", 8192)))
	r.waitFor(t, "the room", hasProblem("larger than 4096 bytes (what the filesystem can spare above its reserve)"))
	if f.count() != 0 {
		t.Fatalf("a bundle larger than the room was applied")
	}
	waitNoStaged(t, dir)
}

// A download a daemon stopped mid-way left staged is removed by the next
// one: nothing else would ever remove it.
func TestURLBundleLeftStagedRemoved(t *testing.T) {
	_, srv := newServed(t, 200, "")
	dir := t.TempDir()
	left := filepath.Join(dir, ".url-bundle-123")
	if err := os.WriteFile(left, []byte("half a bundle"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast,
		Bundle: &URLBundle{Stage: BundleStage{Dir: dir, MaxBytes: 1 << 20, Timeout: time.Minute}, Apply: (&fakeApplier{}).apply}})
	r.next(t)
	if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a download left staged by the daemon before: %v, want removed", err)
	}
}

func TestIsBundleBody(t *testing.T) {
	for _, c := range []struct {
		ct   string
		head string
		want bool
	}{
		{"", "apiVersion: v1\nkind: Pod\n", false},
		{"application/json", `{"kind":"PodList"}`, false},
		{"", "\x1f\x8b\x08", true},
		{MediaTypeLayoutTar + "; charset=binary", "x", true},
		{"", strings.Repeat("\x00", 257) + "ustar\x0000", true},
		{"", strings.Repeat("a", 257) + "ustaX", false},
	} {
		if got := IsBundleBody(c.ct, []byte(c.head)); got != c.want {
			t.Errorf("IsBundleBody(%q, %.20q) = %v, want %v", c.ct, c.head, got, c.want)
		}
	}
}

// A bundle that trickles is cut off by its own timeout, counted from its
// first bytes, and nothing is left staged.
func TestURLBundleTimeout(t *testing.T) {
	s, srv := newServed(t, 200, "")
	f := &fakeApplier{}
	dir := t.TempDir()
	r := startURL(t, URLConfig{URL: srv.URL, Period: time.Hour,
		Bundle: &URLBundle{Stage: BundleStage{Dir: dir, MaxBytes: 1 << 20, Timeout: 300 * time.Millisecond}, Apply: f.apply}})
	r.next(t)
	s.setHandler(func(w http.ResponseWriter, req *http.Request) {
		w.Write([]byte("\x1f\x8b"))
		for {
			w.(http.Flusher).Flush()
			select {
			case <-req.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
				w.Write([]byte("x"))
			}
		}
	})
	r.src.Relist()
	r.waitFor(t, "the timeout", hasProblem("no complete body within 300ms"))
	if f.count() != 0 {
		t.Fatalf("a bundle cut off was applied")
	}
	waitNoStaged(t, dir)
}

// waitNoStaged waits until dir holds no staged bundle: the source fetches
// every period, and a fetch in flight stages its body while it runs, so a
// look at one instant may see that one. A file left behind stays, under a
// name of its own, and the wait fails naming it.
func waitNoStaged(t *testing.T, dir string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left, _ := filepath.Glob(filepath.Join(dir, stagedPattern+"*"))
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("staged files left: %v", left)
			return
		}
		time.Sleep(time.Millisecond)
	}
}
