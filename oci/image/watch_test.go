package image

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// failures counts "image import failed" log records per file.
type failures struct {
	mu    sync.Mutex
	files []string
}

func (f *failures) Enabled(context.Context, slog.Level) bool { return true }
func (f *failures) WithAttrs(as []slog.Attr) slog.Handler    { return (&withFile{f: f}).WithAttrs(as) }
func (f *failures) WithGroup(string) slog.Handler            { return f }
func (f *failures) Handle(_ context.Context, r slog.Record) error {
	return nil
}

func (f *failures) count(file string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, x := range f.files {
		if x == file {
			n++
		}
	}
	return n
}

// withFile is the failures handler after logger.With("file", …).
type withFile struct {
	f    *failures
	file string
}

func (w *withFile) Enabled(context.Context, slog.Level) bool { return true }
func (w *withFile) WithGroup(string) slog.Handler            { return w }
func (w *withFile) WithAttrs(as []slog.Attr) slog.Handler {
	n := &withFile{f: w.f, file: w.file}
	for _, a := range as {
		if a.Key == "file" {
			n.file = a.Value.String()
		}
	}
	return n
}

func (w *withFile) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "import failed") {
		w.f.mu.Lock()
		w.f.files = append(w.f.files, w.file)
		w.f.mu.Unlock()
	}
	return nil
}

func startWatch(t *testing.T, s *Store, dir string) (chan []Image, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	got := make(chan []Image, 16)
	done := make(chan error, 1)
	go func() { done <- s.WatchImports(ctx, dir, func(imgs []Image) { got <- imgs }) }()
	return got, func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("WatchImports: %v", err)
		}
	}
}

func waitImport(t *testing.T, got chan []Image, wantRef string) {
	t.Helper()
	select {
	case imgs := <-got:
		if len(imgs) != 1 || !slices.Contains(imgs[0].Refs, wantRef) {
			t.Fatalf("imported %+v, want %s", imgs, wantRef)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("%s not imported", wantRef)
	}
}

func TestWatchImports(t *testing.T) {
	testroot.Require(t)
	fails := &failures{}
	s, err := Open(filepath.Join(t.TempDir(), "images"), slog.New(fails))
	if err != nil {
		t.Fatal(err)
	}
	s.importQuiet = 200 * time.Millisecond
	dir := filepath.Join(s.Root(), "import")
	src := t.TempDir()

	// Present before the watch starts.
	writeDockerArchive(t, filepath.Join(src, "early.tar"), map[string]v1.Image{"early:v1": testImage(t, baseEntries)})
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(src, "early.tar"), filepath.Join(dir, "early.tar")); err != nil {
		t.Fatal(err)
	}
	got, stop := startWatch(t, s, dir)
	waitImport(t, got, "docker.io/library/early:v1")

	// Copied slowly: half, a pause longer than the quiet period, the rest.
	writeDockerArchive(t, filepath.Join(src, "slow.tar"), map[string]v1.Image{"slow:v1": testImage(t)})
	raw, err := os.ReadFile(filepath.Join(src, "slow.tar"))
	if err != nil {
		t.Fatal(err)
	}
	slow := filepath.Join(dir, "slow.tar")
	f, err := os.Create(slow)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(raw[:len(raw)/2]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(4 * s.importQuiet) // the writer stalls; the watcher tries and fails
	if _, err := f.Write(raw[len(raw)/2:]); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	waitImport(t, got, "docker.io/library/slow:v1")

	// Corrupt for good: reported once, and not retried while unchanged.
	bad := filepath.Join(dir, "bad.tar")
	if err := os.WriteFile(bad, raw[:len(raw)/3], 0o644); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); fails.count(bad) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("bad.tar not reported")
		}
	}
	// A good one after it: by the time it is imported, bad.tar could have been
	// retried.
	touch := filepath.Join(dir, "touch.tar")
	writeDockerArchive(t, touch, map[string]v1.Image{"touch:v1": testImage(t, topEntries)})
	waitImport(t, got, "docker.io/library/touch:v1")
	stop()
	t.Logf("failures: %v", fails.files)
	if n := fails.count(bad); n != 1 {
		t.Errorf("bad.tar reported %d times, want once", n)
	}

	// A restart imports only what is new.
	got, stop = startWatch(t, s, dir)
	defer stop()
	writeDockerArchive(t, filepath.Join(dir, "late.tar"), map[string]v1.Image{"late:v1": testImage(t)})
	waitImport(t, got, "docker.io/library/late:v1")
	select {
	case imgs := <-got:
		t.Errorf("after restart, imported again: %+v", imgs)
	default:
	}
	if n := fails.count(bad); n != 1 {
		t.Errorf("after restart, bad.tar reported %d times, want once", n)
	}
}
