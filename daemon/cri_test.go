package daemon

import (
	"net"
	"os"
	"path/filepath"
	"testing"
)

// A socket systemd passed is served and the daemon binds no path of its own;
// once it is spent (a retry after Serve failed), the daemon binds its path.
func TestCRIListenerPassed(t *testing.T) {
	dir := t.TempDir()
	activated := filepath.Join(dir, "activated.sock")
	own := filepath.Join(dir, "cri.sock")
	sd, err := net.Listen("unix", activated)
	if err != nil {
		t.Fatal(err)
	}
	passed := sd
	l, how, err := criListener(&passed, own)
	if err != nil {
		t.Fatal(err)
	}
	if l != sd || how != "a socket systemd passed" || passed != nil {
		t.Fatalf("got %v (%s), passed left %v: want the passed socket, taken", l.Addr(), how, passed)
	}
	if _, err := os.Lstat(own); !os.IsNotExist(err) {
		t.Fatalf("%s bound beside the passed socket: %v", own, err)
	}
	l.Close()

	l, how, err = criListener(&passed, own)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.Addr().String() != own || how != "a socket of its own" {
		t.Fatalf("got %s (%s), want %s bound by the daemon", l.Addr(), how, own)
	}
	if fi, err := os.Stat(own); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v, %v: want a socket for root only", own, fi, err)
	}
}

// Without socket activation (a daemon started by hand, or staticpodd.service),
// the daemon binds <run-dir>/cri.sock itself and refuses to take it from a
// live daemon.
func TestCRIListenerOwn(t *testing.T) {
	own := filepath.Join(t.TempDir(), "run", "cri.sock")
	var passed net.Listener
	l, _, err := criListener(&passed, own)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, _, err := criListener(&passed, own); err == nil {
		t.Fatal("a second daemon took the socket of a live one")
	}
}
