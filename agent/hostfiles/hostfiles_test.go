package hostfiles

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func write(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

// The digest changes with the contents only: not with the file's inode,
// times or mode.
func TestDigestContents(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	write(t, a, "one")
	d1 := Digest(a)
	if !strings.HasPrefix(d1, "sha256:") {
		t.Fatalf("digest %q", d1)
	}
	write(t, b, "one")
	if err := os.Rename(b, a); err != nil { // a new inode, same contents
		t.Fatal(err)
	}
	_ = os.Chtimes(a, time.Now(), time.Now().Add(time.Hour))
	_ = os.Chmod(a, 0o644)
	if d := Digest(a); d != d1 {
		t.Errorf("same contents, digest %q then %q", d1, d)
	}
	write(t, a, "two")
	if d := Digest(a); d == d1 {
		t.Errorf("new contents, same digest %q", d)
	}
}

// Nothing a path can name hangs the daemon, grows it, or fails it: a FIFO
// with no writer, an endless device, a loop of symlinks, a huge sparse file,
// a directory, a path under a file. Each has a digest that is the same at
// every look, so it is never a restart loop.
func TestDigestHostile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	loop := filepath.Join(dir, "loop")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	huge := filepath.Join(dir, "huge")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil { // 1 TiB, sparse
		t.Fatal(err)
	}
	f.Close()
	file := filepath.Join(dir, "file")
	write(t, file, "x")
	for path, want := range map[string]string{
		fifo:                              "unusable: not a regular file",
		"/dev/zero":                       "unusable: not a regular file",
		loop:                              "unusable: too many levels of symbolic links",
		huge:                              "unusable: larger than",
		dir:                               "unusable: not a regular file",
		filepath.Join(dir, "missing"):     Absent,
		filepath.Join(file, "under"):      Absent,
		filepath.Join(dir, "no/such/dir"): Absent,
	} {
		done := make(chan string)
		go func() { done <- Digest(path) }()
		select {
		case got := <-done:
			if !strings.HasPrefix(got, want) {
				t.Errorf("%s: digest %q, want %q...", path, got, want)
			}
			if again := Digest(path); again != got {
				t.Errorf("%s: digest %q then %q", path, got, again)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: Digest hangs", path)
		}
	}
}

// The watcher sees an edit, an editor's rename away and back, and a file
// made in a directory that did not exist when it was asked about.
func TestWatcherChanges(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "x.conf")
	write(t, conf, "a")
	later := filepath.Join(dir, "later", "y.conf")
	w := New(time.Second, slog.New(slog.DiscardHandler))
	ctx := t.Context()
	go w.Run(ctx)
	first := w.Digests([]string{conf, later})
	if first[1] != Absent {
		t.Fatalf("digests %v", first)
	}
	wait := func(what string, i int, path string, old string) string {
		t.Helper()
		deadline := time.After(20 * time.Second)
		for {
			select {
			case <-w.Changed():
			case <-deadline:
				t.Fatalf("%s: not seen", what)
			}
			// A look in the middle of a write (truncated, not written yet)
			// is a change too; the write's events bring the next.
			if d := w.Digests([]string{conf, later})[i]; d != old && d == Digest(path) {
				return d
			}
		}
	}
	write(t, conf, "b")
	d := wait("an edit", 0, conf, first[0])

	// vim's way with backupcopy=no: the file renamed away, the new one
	// written in its place.
	if err := os.Rename(conf, conf+"~"); err != nil {
		t.Fatal(err)
	}
	write(t, conf, "c")
	d = wait("a rename away and back", 0, conf, d)
	if d != Digest(conf) {
		t.Fatalf("digest %q", d)
	}

	if err := os.MkdirAll(filepath.Dir(later), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, later, "late")
	wait("a file in a directory made later", 1, later, Absent)
}

// Keep forgets paths no pod names any more.
func TestWatcherKeep(t *testing.T) {
	w := New(time.Hour, slog.New(slog.DiscardHandler))
	w.Digests([]string{"/nonexistent/a", "/nonexistent/b"})
	w.Keep(map[string]bool{"/nonexistent/b": true})
	if len(w.digests) != 1 || w.digests["/nonexistent/b"].digest != Absent {
		t.Errorf("digests %v", w.digests)
	}
}
