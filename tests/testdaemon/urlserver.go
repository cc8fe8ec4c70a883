package testdaemon

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// ManifestServer serves a manifest body at /pods on a fixed 127.0.0.1 port,
// and can go down and come back on the same port.
//
// The port stays its own while it is down: a socket bound to it with
// SO_REUSEPORT, never listening, holds it from start to end, and the
// listener binds beside it with SO_REUSEPORT too. So a connection while it
// is down is refused, as by a server that is gone, but no other socket can
// take the port, bound or as an outgoing connection's (unless it sets
// SO_REUSEPORT too, as nothing the tests run does), and Up always gets it
// back.
type ManifestServer struct {
	t    testing.TB
	addr string
	hold int // the socket that holds the port

	mu   sync.Mutex
	body string
	srv  *http.Server // nil while down
	// want, when set, is a header "Key: Value" a request must carry, or
	// it is refused with 403.
	want [2]string
	// served counts the requests answered with the body: the polls a test
	// waits for before it says a poll changed nothing.
	served int
}

// NewManifestServer serves body until the test ends.
func NewManifestServer(t testing.TB, body string) *ManifestServer {
	t.Helper()
	hold, addr, err := holdPort()
	if err != nil {
		t.Fatalf("manifest server: hold a port: %v", err)
	}
	s := &ManifestServer{t: t, addr: addr, hold: hold, body: body}
	t.Cleanup(func() {
		s.Down()
		unix.Close(s.hold)
	})
	s.Up()
	return s
}

// holdPort binds a socket with SO_REUSEPORT to a port the kernel picks on
// 127.0.0.1, without listening on it.
func holdPort() (int, string, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, "", err
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
		unix.Close(fd)
		return -1, "", err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		unix.Close(fd)
		return -1, "", err
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		unix.Close(fd)
		return -1, "", err
	}
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*unix.SockaddrInet4).Port}
	return fd, addr.String(), nil
}

// RefusingAddr is a 127.0.0.1 address that refuses every connection until
// the test ends: its port is held by a socket bound to it and never
// listening, so no other socket takes it meanwhile, as one that was free a
// moment ago could be taken.
func RefusingAddr(t testing.TB) string {
	t.Helper()
	fd, addr, err := holdPort()
	if err != nil {
		t.Fatalf("hold a port: %v", err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return addr
}

// URL is where the body is served.
func (s *ManifestServer) URL() string { return "http://" + s.addr + "/pods" }

func (s *ManifestServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	body, want := s.body, s.want
	ok := want[0] == "" || r.Header.Get(want[0]) == want[1]
	if ok {
		s.served++
	}
	s.mu.Unlock()
	if !ok {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	io.WriteString(w, body)
}

// Served is how many requests were answered with the body so far.
func (s *ManifestServer) Served() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.served
}

// RequireHeader refuses from now on every request without header key set to
// value.
func (s *ManifestServer) RequireHeader(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want = [2]string{key, value}
}

// Set replaces the body served from now on.
func (s *ManifestServer) Set(body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body = body
}

// Down closes the listener and every connection; the port stays held.
func (s *ManifestServer) Down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Close()
		s.srv = nil
	}
}

// Up listens on the port again, beside the socket that holds it; it fails
// the test if it cannot.
func (s *ManifestServer) Up() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return
	}
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var err error
		if cerr := c.Control(func(fd uintptr) {
			err = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
		}); cerr != nil {
			return cerr
		}
		return err
	}}
	l, err := lc.Listen(context.Background(), "tcp", s.addr)
	if err != nil {
		s.t.Fatalf("manifest server: listen on its own port again: %v", err)
	}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(l)
}
