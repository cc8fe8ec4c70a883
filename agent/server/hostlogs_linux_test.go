package server

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// /logs/ opens nothing but regular files and directories: a device node a
// container with podLogsDir (beneath /var/log) mounted planted there is
// refused without being opened, as opening a device acts by itself (a
// watchdog starts, a tape rewinds). inotify's IN_OPEN events count the
// opens; the regular file's shows that they are seen.
func TestHostLogsOpensNoDevice(t *testing.T) {
	testroot.Require(t)
	root := t.TempDir()
	dir := filepath.Join(root, "pods", "ns_p_uid", "main")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mknod(filepath.Join(dir, "0.log"), unix.S_IFCHR|0o600, int(unix.Mkdev(1, 3))); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mkfifo(filepath.Join(dir, "1.log"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "2.log"), []byte("a line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	in, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(in)
	if _, err := unix.InotifyAddWatch(in, dir, unix.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /logs/{path...}", hostLogs(root, logger()))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, name := range []string{"0.log", "1.log"} {
		if code, _, body := get(t, srv.Client(), srv.URL+"/logs/pods/ns_p_uid/main/"+name); code != http.StatusForbidden {
			t.Errorf("/logs/.../%s = %d %q, want 403", name, code, body)
		}
	}
	if code, _, body := get(t, srv.Client(), srv.URL+"/logs/pods/ns_p_uid/main/2.log"); code != 200 || string(body) != "a line\n" {
		t.Errorf("/logs/.../2.log = %d %q", code, body)
	}
	buf := make([]byte, 64<<10)
	n, _ := unix.Read(in, buf)
	got := map[string]bool{}
	for off := 0; off+unix.SizeofInotifyEvent <= n; {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
		name := buf[off+unix.SizeofInotifyEvent : off+unix.SizeofInotifyEvent+int(ev.Len)]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		got[string(name)] = true
		off += unix.SizeofInotifyEvent + int(ev.Len)
	}
	if got["0.log"] || got["1.log"] {
		t.Errorf("opened %v: a device node or a FIFO was opened", got)
	}
	if !got["2.log"] {
		t.Errorf("opened %v: the regular file's open was not seen", got)
	}
}
