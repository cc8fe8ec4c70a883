package source

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// headerServer answers 200 and counts the requests that carried any of the
// configured headers (or a Referer) and those that did not.
type headerServer struct {
	*httptest.Server
	with, without atomic.Int64
}

// configured are the headers the tests configure: one Go forwards to any
// host on its own, and the one it drops for another domain only.
var configured = http.Header{"X-Api-Key": {"sesame"}, "Authorization": {"Bearer sesame"}}

func newHeaderServer(t *testing.T, tlsOn bool, addr string) *headerServer {
	t.Helper()
	s := &headerServer{}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") != "" || r.Header.Get("Authorization") != "" || r.Header.Get("Referer") != "" {
			s.with.Add(1)
		} else {
			s.without.Add(1)
		}
		w.Write([]byte("apiVersion: v1\nkind: PodList\nitems: []\n"))
	}))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on %s: %v", addr, err)
	}
	s.Listener.Close()
	s.Listener = l
	if tlsOn {
		s.StartTLS()
	} else {
		s.Start()
	}
	t.Cleanup(s.Close)
	return s
}

// redirector answers every request with a 302 to target, counting those that
// carried the configured headers.
func redirector(t *testing.T, tlsOn bool, target string) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var with atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Api-Key") == "sesame" {
			with.Add(1)
		}
		http.Redirect(w, r, target, http.StatusFound)
	})
	var s *httptest.Server
	if tlsOn {
		s = httptest.NewTLSServer(h)
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s, &with
}

// testCA writes the certificate every httptest TLS server uses (valid for
// 127.0.0.1 and ::1) as a CA bundle.
func testCA(t *testing.T, s *httptest.Server) string {
	t.Helper()
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return ca
}

// A configured header (X-Api-Key, Authorization) goes to the configured
// origin only: a 302 to another host, or to another port of the same host,
// over http and over https, is followed without it; a redirect within the
// origin keeps it.
func TestConfiguredHeadersStayWithTheirOrigin(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tls    bool
		second string // where the redirect goes
	}{
		{"http, another host", false, "127.0.0.2:0"},
		{"http, another port", false, "127.0.0.1:0"},
		{"https, another host", true, "[::1]:0"},
		{"https, another port", true, "127.0.0.1:0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			second := newHeaderServer(t, tc.tls, tc.second)
			first, firstWith := redirector(t, tc.tls, second.URL+"/pods")
			ca := ""
			if tc.tls {
				ca = testCA(t, first)
			}
			if _, err := NewClient(ca, 0).Fetch(context.Background(), first.URL+"/pods?token=t", configured); err != nil {
				t.Fatalf("fetch through the redirect: %v", err)
			}
			if firstWith.Load() != 1 {
				t.Errorf("the configured host heard the header %d times, want 1", firstWith.Load())
			}
			if second.with.Load() != 0 || second.without.Load() != 1 {
				t.Errorf("the other origin got %d requests with a configured header or a Referer and %d without; want 0 and 1",
					second.with.Load(), second.without.Load())
			}
		})
	}
	t.Run("same origin", func(t *testing.T) {
		var with atomic.Int64
		mux := http.NewServeMux()
		mux.HandleFunc("/old", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/new", http.StatusFound) })
		mux.HandleFunc("/new", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Api-Key") == "sesame" && r.Header.Get("Authorization") == "Bearer sesame" {
				with.Add(1)
			}
		})
		s := httptest.NewTLSServer(mux)
		defer s.Close()
		if _, err := NewClient(testCA(t, s), 0).Fetch(context.Background(), s.URL+"/old", configured); err != nil {
			t.Fatal(err)
		}
		if with.Load() != 1 {
			t.Errorf("a redirect within the origin lost the configured headers")
		}
	})
	t.Run("back to the origin", func(t *testing.T) {
		// configured origin -> another -> the configured origin again: the
		// other server chose that path, so the last hop is not trusted.
		var with atomic.Int64
		mux := http.NewServeMux()
		home := httptest.NewServer(mux)
		defer home.Close()
		away, _ := redirector(t, false, home.URL+"/end")
		mux.HandleFunc("/start", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, away.URL, http.StatusFound) })
		mux.HandleFunc("/end", func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Api-Key") != "" {
				with.Add(1)
			}
		})
		if _, err := NewClient("", 0).Fetch(context.Background(), home.URL+"/start", configured); err != nil {
			t.Fatal(err)
		}
		if with.Load() != 0 {
			t.Errorf("a hop back from another origin carried the configured header")
		}
	})
}

func TestOrigin(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		same bool
	}{
		{"http://h/x", "http://h:80/y", true},
		{"https://H:443/", "https://h/", true},
		{"http://h/", "https://h/", false},
		{"http://h:8080/", "http://h/", false},
		{"http://h/", "http://h.example.com/", false},
		{"http://[::1]:80/", "http://[::1]/", true},
	} {
		a, _ := http.NewRequest(http.MethodGet, tc.a, nil)
		b, _ := http.NewRequest(http.MethodGet, tc.b, nil)
		if got := origin(a.URL) == origin(b.URL); got != tc.same {
			t.Errorf("same origin %s, %s = %v, want %v", tc.a, tc.b, got, tc.same)
		}
	}
}
