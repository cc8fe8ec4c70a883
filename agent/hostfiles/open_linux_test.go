package hostfiles

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// A file a pod can replace (its hostPath is the watched file's directory)
// may become a device node or a FIFO: opening a device can act by itself
// (/dev/watchdog arms the watchdog, a tape rewinds), and opening a FIFO wakes
// its writers. Digest looks such a file up and never opens it: inotify, which
// sees every open but O_PATH's, sees none.
func TestDigestOpensNothingButRegularFiles(t *testing.T) {
	dir := t.TempDir()
	fifo, link, marker := filepath.Join(dir, "fifo"), filepath.Join(dir, "link"), filepath.Join(dir, "marker")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("fifo", link); err != nil {
		t.Fatal(err)
	}
	write(t, marker, "m")
	opened := watchOpens(t, dir)
	for _, p := range []string{fifo, link} {
		if d := Digest(p); d != "unusable: not a regular file (p---------)" {
			t.Errorf("Digest(%s) = %q", p, d)
		}
	}
	if d := Digest(marker); d == Absent {
		t.Fatalf("Digest(marker) = %q", d)
	}
	for _, name := range opened("marker") {
		t.Errorf("Digest opened %s", name)
	}
}

// A relist reads again only the files that changed since they were read:
// 32 files of 4 MiB per pod, hashed at every look, would cost the node a
// core. A file written, renamed over or touched is read again.
func TestRelistReadsChangedFilesOnly(t *testing.T) {
	// Files written just now are read at every look, their times too
	// coarse to tell a write in the same tick: these are taken as old,
	// their writes telling apart by size.
	defer func(r time.Duration) { racy = r }(racy)
	racy = 0
	dir := t.TempDir()
	a, b, marker := filepath.Join(dir, "a"), filepath.Join(dir, "b"), filepath.Join(dir, "marker")
	write(t, a, "a")
	write(t, b, "b")
	write(t, marker, "m")
	w := New(time.Hour, slog.New(slog.DiscardHandler))
	w.Digests([]string{a, b})
	opened := watchOpens(t, dir)
	w.reread(nil)
	Digest(marker)
	if got := opened("marker"); len(got) != 0 {
		t.Errorf("a relist of unchanged files opened %v", got)
	}
	write(t, b, "b2") // another size
	Digest(marker)
	opened("marker") // the write's own open
	w.reread(nil)
	Digest(marker)
	if got := opened("marker"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("a relist after b was written opened %v, want b", got)
	}
	if d := w.Digests([]string{b})[0]; d != Digest(b) {
		t.Errorf("b's digest %q, the file's %q", d, Digest(b))
	}

	// A file changed within racy of its read is read again, at every look.
	racy = time.Hour
	write(t, a, "A")
	Digest(marker)
	opened("marker") // Digest(b)'s and the write's own opens
	for range 2 {
		w.reread(nil)
		Digest(marker)
		if got := opened("marker"); !slices.Equal(got, []string{"a"}) {
			t.Errorf("a relist after a was written just now opened %v, want a", got)
		}
	}
}

// watchOpens watches the opens of files in dir; the function it returns
// reads them up to the open of marker (which the caller makes last), and
// returns the names opened before it.
func watchOpens(t *testing.T, dir string) func(marker string) []string {
	in, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(in) })
	if _, err := syscall.InotifyAddWatch(in, dir, syscall.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	return func(marker string) []string {
		return readOpens(t, in, marker)
	}
}

func readOpens(t *testing.T, in int, marker string) []string {
	var out []string
	buf := make([]byte, 64<<10)
	for {
		n, err := syscall.Read(in, buf)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			name := string(buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)])
			name = strings.TrimRight(name, "\x00")
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			if name == marker {
				return out
			}
			out = append(out, name)
		}
	}
}

// inotifyFDs returns this process's open inotify instances, by fd.
func inotifyFDs(t *testing.T) map[string]bool {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	fds := map[string]bool{}
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && target == "anon_inode:inotify" {
			fds[e.Name()] = true
		}
	}
	return fds
}

// A daemon whose pods stopped naming files holds no inotify instance, nor
// a watch on a host directory: the last path Keep drops closes it, and a
// path named again opens one anew.
func TestWatcherClosesItsInotifyWithTheLastFile(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "x.conf")
	if err := os.WriteFile(conf, []byte("a"), 0o600); err != nil {
		t.Fatal(err)
	}
	w := New(time.Hour, slog.New(slog.DiscardHandler))
	go w.Run(t.Context())
	before := inotifyFDs(t)
	// waitFor waits until this process's inotify instances, those before
	// aside, are n; it returns them.
	waitFor := func(what string, n int) map[string]bool {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			mine := inotifyFDs(t)
			for fd := range before {
				delete(mine, fd)
			}
			if len(mine) == n {
				return mine
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d inotify instances of the watcher, want %d", what, len(mine), n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	for round := range 2 {
		w.Digests([]string{conf})
		waitFor(fmt.Sprintf("round %d: a file to watch", round), 1)
		w.Keep(nil)
		waitFor(fmt.Sprintf("round %d: no file left", round), 0)
	}
}
