package testdaemon

import (
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"
)

// ManifestServer serves a manifest body at /pods on a fixed 127.0.0.1 port,
// and can go down and come back on the same port.
type ManifestServer struct {
	t    testing.TB
	addr string

	mu   sync.Mutex
	body string
	srv  *http.Server // nil while down
	// want, when set, is a header "Key: Value" a request must carry, or
	// it is refused with 403.
	want [2]string
}

// NewManifestServer serves body until the test ends.
func NewManifestServer(t testing.TB, body string) *ManifestServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &ManifestServer{t: t, addr: l.Addr().String(), body: body}
	s.serve(l)
	t.Cleanup(s.Down)
	return s
}

// URL is where the body is served.
func (s *ManifestServer) URL() string { return "http://" + s.addr + "/pods" }

func (s *ManifestServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	body, want := s.body, s.want
	s.mu.Unlock()
	if want[0] != "" && r.Header.Get(want[0]) != want[1] {
		http.Error(w, "forbidden", http.StatusForbidden)
		return
	}
	io.WriteString(w, body)
}

// RequireHeader refuses from now on every request without header key set to
// value.
func (s *ManifestServer) RequireHeader(key, value string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.want = [2]string{key, value}
}

func (s *ManifestServer) serve(l net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(l)
}

// Set replaces the body served from now on.
func (s *ManifestServer) Set(body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body = body
}

// Down closes the listener and every connection.
func (s *ManifestServer) Down() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Close()
		s.srv = nil
	}
}

// Up listens on the same port again; it returns an error when the port
// stays taken.
func (s *ManifestServer) Up() error {
	s.mu.Lock()
	running := s.srv != nil
	s.mu.Unlock()
	if running {
		return nil
	}
	var l net.Listener
	var err error
	for range 50 { // the port is free again at once, but the kernel may disagree for a moment
		if l, err = net.Listen("tcp", s.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return err
	}
	s.serve(l)
	return nil
}
