package hostfiles

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
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
	in, err := syscall.InotifyInit1(syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(in)
	if _, err := syscall.InotifyAddWatch(in, dir, syscall.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, link} {
		if d := Digest(p); d != "unusable: not a regular file (p---------)" {
			t.Errorf("Digest(%s) = %q", p, d)
		}
	}
	// The marker's open is the last event: every open before it was read.
	if d := Digest(marker); d == Absent {
		t.Fatalf("Digest(marker) = %q", d)
	}
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
			if name == "marker" {
				return
			}
			t.Errorf("Digest opened %s", name)
		}
	}
}
