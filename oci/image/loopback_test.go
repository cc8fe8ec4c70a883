package image

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
)

// countAll counts every request reg's handler is given.
func countAll(reg *testRegistry) *atomic.Int64 {
	var n atomic.Int64
	f := func(w http.ResponseWriter, r *http.Request, h http.Handler) {
		n.Add(1)
		h.ServeHTTP(w, r)
	}
	reg.wrap.Store(&f)
	return &n
}

// A plain-HTTP registry on the loopback pulls with no hosts.toml, as under
// containerd: HTTPS is tried, then plain HTTP really spoken.
func TestPullLoopbackPlainHTTPWithoutHostsToml(t *testing.T) {
	reg := newTestRegistry(t, false)
	img := testImage(t)
	reg.push(t, "team/app:v1", img)
	_, port, _ := net.SplitHostPort(reg.host)
	for _, host := range []string{reg.host, "localhost:" + port} {
		t.Run(host, func(t *testing.T) {
			for _, dir := range []string{"", t.TempDir()} { // no dir, and a dir without this host
				before := reg.blobs.Load()
				got, err := NewPuller(openStore(t), PullConfig{HostsDir: dir}, discardLogger()).Pull(t.Context(), host+"/team/app:v1", nil)
				if err != nil {
					t.Fatalf("pull with hosts dir %q: %v", dir, err)
				}
				want, _ := img.ConfigName()
				if got.ID != want.String() {
					t.Fatalf("ID = %s, want %s", got.ID, want)
				}
				if n := reg.blobs.Load() - before; n == 0 {
					t.Fatal("no blob was fetched from the registry")
				}
			}
		})
	}
}

// A TLS registry on the loopback with a certificate of its own pulls with
// no hosts.toml (containerd skips verification for localhost).
func TestPullLoopbackTLSWithoutHostsToml(t *testing.T) {
	reg := newTestRegistry(t, true)
	reg.push(t, "team/app:v1", testImage(t))
	if _, err := NewPuller(openStore(t), PullConfig{}, discardLogger()).Pull(t.Context(), reg.host+"/team/app:v1", nil); err != nil {
		t.Fatal(err)
	}
}

// A registry that is not on the loopback is never spoken to in plain HTTP
// without a hosts.toml saying so, even when it answers TLS in HTTP and its
// address is one go-containerregistry itself would try http for.
func TestPullRemoteNeverFallsBackToHTTP(t *testing.T) {
	reg := newTestRegistry(t, false)
	reg.push(t, "team/app:v1", testImage(t))
	served := countAll(reg)
	for _, host := range []string{"10.0.0.7:5000", "192.168.1.9:5000", "registry.example:5000", "registry.local:5000", "localhost.example:5000"} {
		t.Run(host, func(t *testing.T) {
			eps, err := endpoints("", host, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if len(eps) != 1 || eps[0].scheme != "https" || eps[0].fallback {
				t.Fatalf("endpoints = %+v, want https alone", eps)
			}
			// Every connection, whatever its address, reaches the plain server.
			eps[0].client.Transport.(*http.Transport).DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, reg.host)
			}
			ref := host + "/team/app:v1"
			r, err := name.ParseReference(ref)
			if err != nil {
				t.Fatal(err)
			}
			p := NewPuller(openStore(t), PullConfig{}, discardLogger())
			_, err = p.pullFrom(t.Context(), eps[0], p.cfg.Keyring, r, "", ref, ref, nil)
			if err == nil || !strings.Contains(err.Error(), "HTTP response to HTTPS client") {
				t.Fatalf("pull = %v, want a refusal to speak plain HTTP", err)
			}
			if n := served.Load(); n != 0 {
				t.Fatalf("the registry served %d plain-HTTP requests, want 0", n)
			}
		})
	}
}

func TestEndpointsLoopbackDefaults(t *testing.T) {
	for _, tc := range []struct {
		host     string
		scheme   string
		fallback bool
	}{
		{"127.0.0.1:5000", "https", true},
		{"127.1.2.3:5000", "https", true},
		{"localhost:5000", "https", true},
		{"[::1]:5000", "https", true},
		{"localhost:80", "http", false},
		{"127.0.0.1:443", "https", false},
		{"localhost", "https", false},
		{"10.0.0.7:5000", "https", false},
		{"localhost.example:5000", "https", false},
		{"128.0.0.1:5000", "https", false},
	} {
		eps, err := endpoints("", tc.host, time.Second)
		if err != nil {
			t.Fatalf("%s: %v", tc.host, err)
		}
		if len(eps) != 1 || eps[0].scheme != tc.scheme || eps[0].fallback != tc.fallback || eps[0].host != tc.host {
			t.Errorf("%s: endpoint %+v, want scheme %s, fallback %v", tc.host, eps[0], tc.scheme, tc.fallback)
		}
	}
	// A hosts.toml decides alone: its http server is plain HTTP, no https first.
	dir := t.TempDir()
	writeHosts(t, dir, "127.0.0.1:5000", "server = \"https://127.0.0.1:5000\"\n")
	eps, err := endpoints(dir, "127.0.0.1:5000", time.Second)
	if err != nil || len(eps) != 1 || eps[0].fallback || eps[0].scheme != "https" {
		t.Fatalf("with hosts.toml: %+v, %v; want https without fallback", eps, err)
	}
}

// A registry that answers HTTPS in plain HTTP fails the pull with an error
// that says how to speak HTTP to it: the hosts.toml to write, under
// --registry-config-dir's directory, and the line it needs.
func TestPullPlainHTTPErrorNamesHostsToml(t *testing.T) {
	reg := newTestRegistry(t, false)
	reg.push(t, "team/app:v1", testImage(t))
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "https://"+reg.host)) // HTTPS said, no fallback
	_, err := NewPuller(openStore(t), PullConfig{HostsDir: hosts}, discardLogger()).Pull(t.Context(), reg.host+"/team/app:v1", nil)
	want := fmt.Sprintf("registry %s speaks plain HTTP: to pull from it over HTTP, write %s with the line server = %q (containerd's layout, read from --registry-config-dir",
		reg.host, filepath.Join(hosts, reg.host, "hosts.toml"), "http://"+reg.host)
	if err == nil || !strings.Contains(err.Error(), "HTTP response to HTTPS client") || !strings.Contains(err.Error(), want) {
		t.Fatalf("pull = %v, want the HTTPS error and %q", err, want)
	}
	if err := plainHTTPHint(errors.New("dial tcp: connection refused"), hosts, reg.host); strings.Contains(err.Error(), "hosts.toml") {
		t.Errorf("another error got the plain HTTP hint: %v", err)
	}
}
