package logfiles

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"unsafe"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// opened returns the names in the directory watched by the inotify
// descriptor fd that were opened since the last call.
func opened(t *testing.T, fd int) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	buf := make([]byte, 64<<10)
	n, err := syscall.Read(fd, buf)
	if errors.Is(err, syscall.EAGAIN) {
		return names
	}
	if err != nil {
		t.Fatal(err)
	}
	for off := 0; off+syscall.SizeofInotifyEvent <= n; {
		ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
		name := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
		if i := indexNUL(name); i >= 0 {
			name = name[:i]
		}
		if ev.Mask&syscall.IN_OPEN != 0 {
			names[string(name)] = true
		}
		off += syscall.SizeofInotifyEvent + int(ev.Len)
	}
	return names
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// A device node planted as a log file (a container with CAP_MKNOD and the
// pod log directory mounted) is never opened by a reader: opening a device
// acts by itself (a watchdog starts, a tape rewinds). The inotify IN_OPEN
// events of the directory count the opens; a regular file's open shows
// that they are seen.
func TestOpenLogOpensNoDevice(t *testing.T) {
	testroot.Require(t)
	ctr := filepath.Join(t.TempDir(), "pods", "ns_p_uid", "main")
	if err := os.MkdirAll(ctr, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mknod(filepath.Join(ctr, "0.log"), syscall.S_IFCHR|0o600, 1<<8|3); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(ctr, "1.log"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ctr, "2.log"), []byte("a line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := syscall.InotifyInit1(syscall.IN_NONBLOCK | syscall.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(in)
	if _, err := syscall.InotifyAddWatch(in, ctr, syscall.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"0.log", "1.log"} {
		if f, err := OpenLog(filepath.Join(ctr, name)); err == nil {
			f.Close()
			t.Errorf("OpenLog opened %s, not a regular file", name)
		} else if !errors.Is(err, ErrNotRegular) {
			t.Errorf("OpenLog(%s) = %v, want ErrNotRegular", name, err)
		}
	}
	f, err := OpenLog(filepath.Join(ctr, "2.log"))
	if err != nil {
		t.Fatal(err)
	}
	f.Close()
	got := opened(t, in)
	if got["0.log"] || got["1.log"] {
		t.Errorf("opened %v: a device node or a FIFO was opened", got)
	}
	if !got["2.log"] {
		t.Errorf("opened %v: the regular file's open was not seen", got)
	}
}
