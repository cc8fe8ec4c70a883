package image

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
)

// A manifest the registry redirects to another host (or path) is bounded
// as one it serves itself: the bound is by what was asked for, not by the
// path of the last hop.
func TestPullRedirectedManifestBounded(t *testing.T) {
	for _, withLength := range []bool{true, false} {
		t.Run(fmt.Sprintf("length=%v", withLength), func(t *testing.T) {
			big := []byte(`{"schemaVersion":2,"x":"` + strings.Repeat("a", maxManifestSize) + `"}`)
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
				if withLength {
					w.Header().Set("Content-Length", fmt.Sprint(len(big)))
				}
				w.Write(big)
			}))
			t.Cleanup(other.Close)
			reg := newTestRegistry(t, false)
			f := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
				if strings.Contains(req.URL.Path, "/manifests/") {
					http.Redirect(w, req, other.URL+"/somewhere/else", http.StatusTemporaryRedirect)
					return
				}
				next.ServeHTTP(w, req)
			}
			reg.wrap.Store(&f)
			hosts := t.TempDir()
			writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
			p := NewPuller(openStore(t), PullConfig{HostsDir: hosts}, discardLogger())
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			_, err := p.Pull(ctx, reg.host+"/team/big:v1", nil)
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d", maxManifestSize)) {
				t.Fatalf("err = %v, want the manifest's size bound", err)
			}
		})
	}
}

// The progress deadline follows a blob the registry redirects to another
// host, and names that host.
func TestPullStallFollowsRedirect(t *testing.T) {
	reg, cdn := newTestRegistry(t, false), newTestRegistry(t, false)
	img := testImage(t)
	reg.push(t, "team/cdn:v1", img)
	cdn.push(t, "team/cdn:v1", img)
	digest, blob := lastBlob(t, img)
	trickle(cdn, digest, blob, 20*time.Millisecond, nil)
	f := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/blobs/"+digest) {
			http.Redirect(w, req, "http://"+cdn.host+req.URL.Path, http.StatusTemporaryRedirect)
			return
		}
		next.ServeHTTP(w, req)
	}
	reg.wrap.Store(&f)
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts, MaxParallel: 1, ProgressTimeout: 300 * time.Millisecond}, discardLogger())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := p.Pull(ctx, reg.host+"/team/cdn:v1", nil)
	var se *StallError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "blob "+digest+" from "+cdn.host+" stalled after ") {
		t.Fatalf("err = %v, want the redirected blob's StallError naming %s", err, cdn.host)
	}
}

// A token endpoint on a third host that trickles fails the pull at the
// progress deadline too.
func TestPullStalledTokenEndpointFails(t *testing.T) {
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{`))
		w.(http.Flusher).Flush()
		<-req.Context().Done()
	}))
	t.Cleanup(token.Close)
	// A name, not an IP literal: go-containerregistry refuses realms on
	// private addresses other than the registry's own.
	tokenHost := strings.Replace(strings.TrimPrefix(token.URL, "http://"), "127.0.0.1", "localhost", 1)
	reg := newTestRegistry(t, false)
	reg.push(t, "team/auth:v1", testImage(t))
	f := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.Header.Get("Authorization") == "" {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q,service="test"`, "http://"+tokenHost+"/token"))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, req)
	}
	reg.wrap.Store(&f)
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts, ProgressTimeout: 300 * time.Millisecond}, discardLogger())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	began := time.Now()
	_, err := p.Pull(ctx, reg.host+"/team/auth:v1", nil)
	var se *StallError
	if !errors.As(err, &se) || !strings.Contains(err.Error(), "response /token from "+tokenHost) {
		t.Fatalf("err = %v after %v, want the token endpoint's StallError", err, time.Since(began))
	}
	t.Logf("after %v: %v", time.Since(began).Round(time.Millisecond), err)
}

// What a registry chose of a stall error's labels (a token realm's path
// here) reaches the pod's status, events and the log printable: no line
// breaks, no terminal escapes.
func TestPullStallErrorIsPrintable(t *testing.T) {
	token := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		w.Write([]byte(`{`))
		w.(http.Flusher).Flush()
		<-req.Context().Done()
	}))
	t.Cleanup(token.Close)
	tokenHost := strings.Replace(strings.TrimPrefix(token.URL, "http://"), "127.0.0.1", "localhost", 1)
	reg := newTestRegistry(t, false)
	reg.push(t, "team/auth:v1", testImage(t))
	f := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.Header.Get("Authorization") == "" {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer realm=%q,service="test"`, "http://"+tokenHost+"/t%0Aforged line%1B%5B2J%E2%80%AE"))
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, req)
	}
	reg.wrap.Store(&f)
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts, ProgressTimeout: 300 * time.Millisecond}, discardLogger())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := p.Pull(ctx, reg.host+"/team/auth:v1", nil)
	var se *StallError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want the token endpoint's StallError", err)
	}
	msg := err.Error()
	for _, r := range msg {
		if !unicode.IsPrint(r) {
			t.Fatalf("stall error carries %U: %q", r, msg)
		}
	}
	if !strings.Contains(msg, "forged line") {
		t.Fatalf("stall error %q does not name the path", msg)
	}
}

// A label stays near maxStallLabel bytes however it is made up.
func TestStallLabelBound(t *testing.T) {
	for _, s := range []string{strings.Repeat("a", 10000), strings.Repeat("\x1b", 10000), strings.Repeat("\u202e", 10000), strings.Repeat("\xff", 10000)} {
		if got := bound(s); len(got) > maxStallLabel+len(`\U0010ffff`)+len("...") || !strings.HasSuffix(got, "...") {
			t.Errorf("bound of %d bytes of %q: %d bytes %q", len(s), s[:1], len(got), got)
		}
	}
}

// A pull cut by its progress deadline leaves the store as it was: no
// staging dir, no layer, no reference; and the next pull is whole.
func TestPullStallLeavesStoreClean(t *testing.T) {
	reg := newTestRegistry(t, false)
	img := testImage(t)
	reg.push(t, "team/clean:v1", img)
	digest, blob := lastBlob(t, img)
	trickle(reg, digest, blob, 20*time.Millisecond, nil)
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	s := openStore(t)
	before := treeDigest(t, s.Root())
	p := NewPuller(s, PullConfig{HostsDir: hosts, MaxParallel: 1, ProgressTimeout: 300 * time.Millisecond}, discardLogger())
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	_, err := p.Pull(ctx, reg.host+"/team/clean:v1", nil)
	var se *StallError
	if !errors.As(err, &se) {
		t.Fatalf("err = %v, want a StallError", err)
	}
	if after := treeDigest(t, s.Root()); after != before {
		t.Fatalf("store after the stalled pull:\n%s\nwant\n%s", after, before)
	}
	reg.wrap.Store(nil)
	got, err := p.Pull(ctx, reg.host+"/team/clean:v1", nil)
	if err != nil {
		t.Fatalf("pull after the stall: %v", err)
	}
	want, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != want.String() {
		t.Fatalf("pulled %s, want %s", got.ID, want)
	}
}

// A registry that redirects a blob on and on (each hop answered in time,
// no body ever) is stopped after maxRedirects hops, as Go's own client and
// containerd stop: go-containerregistry's redirect check sets no limit.
func TestPullRedirectLoopStops(t *testing.T) {
	reg := newTestRegistry(t, false)
	img := testImage(t)
	reg.push(t, "team/loop:v1", img)
	digest, _ := lastBlob(t, img)
	var hops atomic.Int64
	f := func(w http.ResponseWriter, req *http.Request, next http.Handler) {
		if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/blobs/"+digest) {
			http.Redirect(w, req, fmt.Sprintf("%s?hop=%d", req.URL.Path, hops.Add(1)), http.StatusTemporaryRedirect)
			return
		}
		next.ServeHTTP(w, req)
	}
	reg.wrap.Store(&f)
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts, MaxParallel: 1}, discardLogger())
	// The bound of the test: without a limit the loop goes on until it.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	_, err := p.Pull(ctx, reg.host+"/team/loop:v1", nil)
	if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), fmt.Sprintf("stopped after %d redirects", maxRedirects)) {
		t.Fatalf("err = %v after %d hops, want the redirect limit", err, hops.Load())
	}
	if n := hops.Load(); n != maxRedirects {
		t.Fatalf("the registry redirected %d times, want %d", n, maxRedirects)
	}
}
