package image

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// testRegistry is a real OCI registry on 127.0.0.1 (go-containerregistry's),
// behind a handler that counts requests and can be made to misbehave.
type testRegistry struct {
	srv   *httptest.Server
	host  string
	blobs atomic.Int64 // blob GETs served
	wrap  atomic.Pointer[func(http.ResponseWriter, *http.Request, http.Handler)]
	// connState, when set, sees each connection's state changes.
	connState atomic.Pointer[func(net.Conn, http.ConnState)]
	reg       http.Handler
	user      string
	pass      string
	prefix    string // a path the API is served under, for override_path
	tlsCert   string // PEM of the server's certificate, with TLS
}

func newTestRegistry(t *testing.T, tls bool) *testRegistry {
	t.Helper()
	r := &testRegistry{reg: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	h := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if r.user != "" {
			u, p, ok := req.BasicAuth()
			if !ok || u != r.user || p != r.pass {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
				return
			}
		}
		if r.prefix != "" {
			if !strings.HasPrefix(req.URL.Path, r.prefix) {
				http.NotFound(w, req)
				return
			}
			req.URL.Path = "/v2" + strings.TrimPrefix(req.URL.Path, r.prefix)
		}
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
			r.blobs.Add(1)
		}
		if f := r.wrap.Load(); f != nil {
			(*f)(w, req, r.reg)
			return
		}
		r.reg.ServeHTTP(w, req)
	})
	r.srv = httptest.NewUnstartedServer(h)
	// Set before the server serves: a test's hook goes through connState.
	r.srv.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if f := r.connState.Load(); f != nil {
			(*f)(c, s)
		}
	}
	if tls {
		r.srv.StartTLS()
		r.tlsCert = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.srv.Certificate().Raw}))
	} else {
		r.srv.Start()
	}
	t.Cleanup(r.srv.Close)
	r.host = strings.TrimPrefix(strings.TrimPrefix(r.srv.URL, "http://"), "https://")
	return r
}

// push writes img to the registry as repo:tag, straight, without prefix
// or credentials in the way.
func (r *testRegistry) push(t *testing.T, ref string, img v1.Image) {
	t.Helper()
	srv := httptest.NewServer(r.reg)
	defer srv.Close()
	dst, err := name.ParseReference(strings.TrimPrefix(srv.URL, "http://")+"/"+ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(dst, img); err != nil {
		t.Fatal(err)
	}
}

// writeHosts writes dir/<host>/hosts.toml.
func writeHosts(t *testing.T, dir, host, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Join(dir, host), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, host, "hosts.toml"), []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPullAndRepullIsNoOp(t *testing.T) {
	reg := newTestRegistry(t, false)
	img := testImage(t)
	reg.push(t, "team/app:v1", img)
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	s := openStore(t)
	p := NewPuller(s, PullConfig{HostsDir: hosts}, discardLogger())
	var reports []Progress
	got, err := p.Pull(t.Context(), reg.host+"/team/app:v1", func(pr Progress) { reports = append(reports, pr) })
	if err != nil {
		t.Fatal(err)
	}
	want, _ := img.ConfigName()
	if got.ID != want.String() {
		t.Fatalf("ID = %s, want the config digest %s", got.ID, want)
	}
	md, _ := img.Digest()
	if len(got.RepoDigests) != 1 || got.RepoDigests[0] != reg.host+"/team/app@"+md.String() {
		t.Fatalf("RepoDigests = %v, want %s", got.RepoDigests, reg.host+"/team/app@"+md.String())
	}
	if last := reports[len(reports)-1]; last.Layers != 2 || last.LayersDone != 2 || last.BytesDone != last.Bytes || last.Bytes == 0 {
		t.Fatalf("last progress = %+v, want 2/2 layers", last)
	}
	checkBaseLayer(t, s.layerDir(got.Layers[0]))
	stored, err := s.Get(reg.host + "/team/app:v1")
	if err != nil || stored.ID != got.ID {
		t.Fatalf("Get = %+v, %v", stored, err)
	}
	before := reg.blobs.Load()
	if _, err := p.Pull(t.Context(), reg.host+"/team/app:v1", nil); err != nil {
		t.Fatal(err)
	}
	if n := reg.blobs.Load() - before; n != 0 {
		t.Fatalf("re-pull fetched %d blobs, want none", n)
	}
	// The tag moves: the new image is fetched, only its new layer unpacked.
	img2 := testImage(t, baseEntries, []entry{{name: "v2.txt", body: "two"}})
	reg.push(t, "team/app:v1", img2)
	got2, err := p.Pull(t.Context(), reg.host+"/team/app:v1", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got2.ID == got.ID {
		t.Fatal("the moved tag pulled the old image")
	}
	// The old image stays for image GC to remove, named by its repo digest
	// only (TestPullOfMovedTagKeepsTheImageByDigest).
	if old, err := s.Get(got.RepoDigests[0]); err != nil || old.ID != got.ID || len(old.Refs) != 0 {
		t.Fatalf("the image the tag named before: %+v, %v; want it by its repo digest, with no reference", old, err)
	}
}

func TestPullIndexTakesHostPlatform(t *testing.T) {
	reg := newTestRegistry(t, false)
	amd := testImage(t)
	arm, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	idx := mutate.AppendManifests(emptyIndex(),
		mutate.IndexAddendum{Add: arm, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "arm64"}}},
		mutate.IndexAddendum{Add: amd, Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}},
	)
	srv := httptest.NewServer(reg.reg)
	defer srv.Close()
	dst, _ := name.ParseReference(strings.TrimPrefix(srv.URL, "http://")+"/multi:1", name.Insecure)
	if err := remote.WriteIndex(dst, idx); err != nil {
		t.Fatal(err)
	}
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts, Platform: &v1.Platform{OS: "linux", Architecture: "amd64"}}, discardLogger())
	got, err := p.Pull(t.Context(), reg.host+"/multi:1", nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := amd.ConfigName()
	if got.ID != want.String() {
		t.Fatalf("pulled %s, want the amd64 image %s", got.ID, want)
	}
	// The repo digest is the index's, the one the tag names, as
	// containerd's; Resolve, which follow-tags compares it to, says the same.
	id, _ := idx.Digest()
	if want := reg.host + "/multi@" + id.String(); !slices.Equal(got.RepoDigests, []string{want}) {
		t.Fatalf("RepoDigests %v, want the index's %s", got.RepoDigests, want)
	}
	if r, err := p.Resolve(t.Context(), reg.host+"/multi:1"); err != nil || r != got.RepoDigests[0] {
		t.Fatalf("Resolve = %s, %v; want %s", r, err, got.RepoDigests[0])
	}
}

// A mirror in docker.io's hosts.toml serves Docker Hub's images; Docker Hub
// itself (a closed local port standing in for it) is never needed.
func TestPullMirrorForDockerHub(t *testing.T) {
	reg := newTestRegistry(t, false)
	reg.prefix = "/mirror/dockerhub"
	img := testImage(t)
	reg.push(t, "library/nginx:latest", img)
	hosts := t.TempDir()
	writeHosts(t, hosts, "docker.io", fmt.Sprintf(`server = "https://127.0.0.1:1"
[host."http://127.0.0.1:1"]
  capabilities = ["pull", "resolve"]
[host."http://%s/mirror/dockerhub"]
  capabilities = ["pull", "resolve"]
  override_path = true
`, reg.host))
	s := openStore(t)
	p := NewPuller(s, PullConfig{HostsDir: hosts}, discardLogger())
	got, err := p.Pull(t.Context(), "nginx", nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Refs[0] != "docker.io/library/nginx:latest" {
		t.Fatalf("refs = %v", got.Refs)
	}
	if !strings.HasPrefix(got.RepoDigests[0], "docker.io/library/nginx@sha256:") {
		t.Fatalf("repo digests = %v", got.RepoDigests)
	}
	// A host that may only pull cannot resolve a tag.
	writeHosts(t, hosts, "docker.io", fmt.Sprintf(`server = "https://127.0.0.1:1"
capabilities = ["pull"]
[host."http://%s/mirror/dockerhub"]
  capabilities = ["pull"]
  override_path = true
`, reg.host))
	if _, err := p.Pull(t.Context(), "nginx:latest", nil); err == nil || !strings.Contains(err.Error(), "resolve") {
		t.Fatalf("pull of a tag through pull-only hosts: %v, want an error about resolve", err)
	}
	md, _ := img.Digest()
	if _, err := p.Pull(t.Context(), "nginx@"+md.String(), nil); err != nil {
		t.Fatalf("pull by digest through a pull-only mirror: %v", err)
	}
}

func TestPullTLSAndCredentials(t *testing.T) {
	reg := newTestRegistry(t, true)
	reg.push(t, "private/app:v1", testImage(t))
	reg.user, reg.pass = "alice", "s3cret"
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, "server = \"https://"+reg.host+"\"\nca = \"ca.pem\"\n")
	if err := os.WriteFile(filepath.Join(hosts, reg.host, "ca.pem"), []byte(reg.tlsCert), 0o644); err != nil {
		t.Fatal(err)
	}
	cfgDir := t.TempDir()
	writeCreds := func(user, pass string) *Keyring {
		auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
		p := filepath.Join(cfgDir, "config.json")
		if err := os.WriteFile(p, fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, "https://"+reg.host, auth), 0o600); err != nil {
			t.Fatal(err)
		}
		k, err := LoadKeyring([]string{filepath.Join(cfgDir, "missing.json"), p})
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	s := openStore(t)
	ref := reg.host + "/private/app:v1"
	_, err := NewPuller(s, PullConfig{HostsDir: hosts, Keyring: writeCreds("alice", "wrong")}, discardLogger()).Pull(t.Context(), ref, nil)
	if err == nil || !strings.Contains(err.Error(), "UNAUTHORIZED") || !strings.Contains(err.Error(), reg.host) {
		t.Fatalf("pull with a wrong password: %v, want the registry's UNAUTHORIZED naming it", err)
	}
	if _, err := NewPuller(s, PullConfig{HostsDir: hosts, Keyring: writeCreds("alice", "s3cret")}, discardLogger()).Pull(t.Context(), ref, nil); err != nil {
		t.Fatal(err)
	}
	// Without the CA, the certificate is refused; skip_verify takes it.
	writeHosts(t, hosts, reg.host, "server = \"https://"+reg.host+"\"\n")
	k := writeCreds("alice", "s3cret")
	if _, err := NewPuller(s, PullConfig{HostsDir: hosts, Keyring: k}, discardLogger()).Pull(t.Context(), ref, nil); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("pull without the CA: %v, want a certificate error", err)
	}
	writeHosts(t, hosts, reg.host, "server = \"https://"+reg.host+"\"\nskip_verify = true\n")
	if _, err := NewPuller(s, PullConfig{HostsDir: hosts, Keyring: k}, discardLogger()).Pull(t.Context(), ref, nil); err != nil {
		t.Fatalf("pull with skip_verify: %v", err)
	}
}

func TestKeyringLookup(t *testing.T) {
	k, err := parseDockerConfig([]byte(`{"auths":{
		"https://index.docker.io/v1/":{"username":"hub","password":"p1"},
		"*.example.com":{"username":"glob","password":"p2"},
		"reg.example.com/team":{"username":"team","password":"p3"},
		"127.0.0.1:5000":{"username":"local","password":"p4"}}}`), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ host, repo, user string }{
		{"docker.io", "library/nginx", "hub"},
		{"reg.example.com", "team/app", "team"},
		{"reg.example.com", "other/app", "glob"},
		{"a.b.example.com", "x", ""},
		{"127.0.0.1:5000", "x", "local"},
		{"127.0.0.1", "x", ""},
	} {
		c, ok := k.lookup(tc.host, tc.repo)
		if c.user != tc.user || ok != (tc.user != "") {
			t.Errorf("lookup(%s, %s) = %q, %v; want %q", tc.host, tc.repo, c.user, ok, tc.user)
		}
	}
	// Docker Hub's API host gets Docker Hub's credentials.
	repo, _ := name.NewRepository("registry-1.docker.io/library/nginx")
	a, err := k.Resolve(repo)
	if err != nil {
		t.Fatal(err)
	}
	if cfg, _ := a.Authorization(); cfg.Username != "hub" {
		t.Errorf("registry-1.docker.io gets user %q, want hub", cfg.Username)
	}
}

func TestHostsTomlRefusesBadEntries(t *testing.T) {
	for _, body := range []string{
		`server = "ftp://x"`,
		`[host."https://m"]` + "\ncapabilities = [\"fly\"]\n",
		`[host."https://m"]` + "\nca = \"missing.pem\"\n",
		`server = `,
	} {
		dir := t.TempDir()
		writeHosts(t, dir, "r.example", body)
		if _, err := endpoints(dir, "r.example", time.Second); err == nil || !strings.Contains(err.Error(), "hosts.toml") {
			t.Errorf("%q: %v, want an error naming the hosts.toml", body, err)
		}
	}
}

// A registry that serves bytes other than the digests promise, an endless
// body or a huge manifest is refused, within bounds, and the store keeps
// nothing of it.
func TestPullHostile(t *testing.T) {
	reg := newTestRegistry(t, false)
	img := testImage(t)
	reg.push(t, "bad/app:v1", img)
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	ref := reg.host + "/bad/app:v1"
	layers, _ := img.Layers()
	d, _ := layers[0].Digest()
	layerDigest := d.String()
	rc, _ := layerOf(t, []entry{{name: "evil", body: strings.Repeat("e", 1000)}}).Compressed()
	evil, _ := io.ReadAll(rc)
	cases := []struct {
		name string
		wrap func(http.ResponseWriter, *http.Request, http.Handler)
		want string
	}{
		{"layer with other bytes", func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if !strings.Contains(r.URL.Path, "/blobs/"+layerDigest) || r.Method != http.MethodGet {
				next.ServeHTTP(w, r)
				return
			}
			// A well-formed layer, but not the one the manifest names.
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush() // chunked: no Content-Length to refuse it by
			w.Write(evil)
		}, "error verifying"},
		{"endless layer", func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if !strings.Contains(r.URL.Path, "/blobs/") || r.Method != http.MethodGet {
				next.ServeHTTP(w, r)
				return
			}
			w.WriteHeader(http.StatusOK)
			chunk := bytes.Repeat([]byte{'x'}, 64<<10)
			for range 1 << 14 { // 1 GiB at most, unless the client stops first
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, ""},
		{"endless manifest", func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if !strings.Contains(r.URL.Path, "/manifests/") {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			if r.Method == http.MethodHead {
				return
			}
			w.WriteHeader(http.StatusOK)
			chunk := bytes.Repeat([]byte{' '}, 64<<10)
			for range 1 << 14 {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, "refused"},
		{"huge error message", func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if !strings.Contains(r.URL.Path, "/manifests/") {
				next.ServeHTTP(w, r)
				return
			}
			// Within go-containerregistry's 64 KiB of error body, but no
			// waiting message or event should carry it all.
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"errors":[{"code":"UNAUTHORIZED","message":%q}]}`, strings.Repeat("ab", 30<<10))
		}, "UNAUTHORIZED"},
		{"huge declared manifest", func(w http.ResponseWriter, r *http.Request, next http.Handler) {
			if !strings.Contains(r.URL.Path, "/manifests/") {
				next.ServeHTTP(w, r)
				return
			}
			w.Header().Set("Content-Type", "application/vnd.oci.image.manifest.v1+json")
			w.Header().Set("Content-Length", fmt.Sprint(1<<40))
			w.WriteHeader(http.StatusOK)
		}, "refused"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg.wrap.Store(&tc.wrap)
			defer reg.wrap.Store(nil)
			s := openStore(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			_, err := NewPuller(s, PullConfig{HostsDir: hosts}, discardLogger()).Pull(ctx, ref, nil)
			if err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("pull: %v, want an error saying %q, before the deadline", err, tc.want)
			}
			if n := len(err.Error()); n > maxErrorText+256 {
				t.Fatalf("the pull's error is %d bytes long, more than its bound %d", n, maxErrorText)
			}
			if imgs, _ := s.List(); len(imgs) != 0 {
				t.Fatalf("store has %v after a refused pull", imgs)
			}
			if n := countDir(t, s.layersDir()); n != 0 {
				t.Fatalf("%d layers left in the store", n)
			}
			if n := countDir(t, s.tmpDir()); n != 0 {
				t.Fatalf("%d staging dirs left", n)
			}
		})
	}
}

func emptyIndex() v1.ImageIndex { return empty.Index }

// serializeImagePulls: with MaxParallel 1 two pulls of different images never
// fetch at the same time; with 2 they do.
func TestPullMaxParallel(t *testing.T) {
	for _, tc := range []struct {
		parallel int
		want     int64
	}{{1, 1}, {2, 2}} {
		t.Run(fmt.Sprint(tc.parallel), func(t *testing.T) {
			reg := newTestRegistry(t, false)
			reg.push(t, "a/app:v1", testImage(t, []entry{{name: "a", body: "a"}}))
			reg.push(t, "b/app:v1", testImage(t, []entry{{name: "b", body: "b"}}))
			var now, most atomic.Int64
			both := make(chan struct{})
			var once sync.Once
			wrap := func(w http.ResponseWriter, r *http.Request, next http.Handler) {
				if !strings.Contains(r.URL.Path, "/manifests/") || r.Method != http.MethodGet {
					next.ServeHTTP(w, r)
					return
				}
				n := now.Add(1)
				defer now.Add(-1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				if n == 2 {
					once.Do(func() { close(both) })
				}
				// Hold the first pull a while: a second one allowed to run
				// comes in meanwhile.
				select {
				case <-both:
				case <-time.After(500 * time.Millisecond):
				}
				next.ServeHTTP(w, r)
			}
			reg.wrap.Store(&wrap)
			hosts := t.TempDir()
			writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
			p := NewPuller(openStore(t), PullConfig{HostsDir: hosts, MaxParallel: tc.parallel}, discardLogger())
			var wg sync.WaitGroup
			for _, ref := range []string{"a/app:v1", "b/app:v1"} {
				wg.Go(func() {
					if _, err := p.Pull(t.Context(), reg.host+"/"+ref, nil); err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			if got := most.Load(); got != tc.want {
				t.Errorf("at most %d pulls at once, want %d", got, tc.want)
			}
		})
	}
}

// Each pull reads its hosts.toml again and has HTTP clients of its own: it
// closes their connections when it ends, so that pulls do not leave a
// daemon holding idle sockets for IdleConnTimeout each.
func TestPullsLeaveNoConnectionOpen(t *testing.T) {
	reg := newTestRegistry(t, false)
	var open atomic.Int64
	count := func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	reg.connState.Store(&count)
	reg.push(t, "team/app:v1", testImage(t))
	hosts := t.TempDir()
	writeHosts(t, hosts, reg.host, fmt.Sprintf("server = %q\n", "http://"+reg.host))
	p := NewPuller(openStore(t), PullConfig{HostsDir: hosts}, discardLogger())
	for i := range 5 {
		if _, err := p.Pull(t.Context(), reg.host+"/team/app:v1", nil); err != nil {
			t.Fatalf("pull %d: %v", i, err)
		}
	}
	// The server sees a close once the client's FIN arrives.
	deadline := time.Now().Add(5 * time.Second)
	for open.Load() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections to the registry still open after the pulls", open.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A pull's own credential (the CRI's AuthConfig) is used for the image's
// registry in place of the Docker config's, and never sent to a mirror,
// which gets the Docker config's; pulls with other credentials do not share
// a call.
func TestPullOwnCredentialOnlyToItsRegistry(t *testing.T) {
	origin := newTestRegistry(t, false)
	origin.push(t, "private/app:v1", testImage(t))
	origin.user, origin.pass = "alice", "s3cret"
	mirror := newTestRegistry(t, false)
	mirror.push(t, "private/app:v2", testImage(t))
	mirror.user, mirror.pass = "bob", "mirr0r"
	var leaked atomic.Bool
	spy := func(w http.ResponseWriter, r *http.Request, next http.Handler) {
		if u, _, _ := r.BasicAuth(); u == "alice" {
			leaked.Store(true)
		}
		next.ServeHTTP(w, r)
	}
	mirror.wrap.Store(&spy)
	hosts := t.TempDir()
	writeHosts(t, hosts, origin.host, fmt.Sprintf(`server = "http://%s"
[host."http://%s"]
  capabilities = ["pull", "resolve"]
`, origin.host, mirror.host))
	cfg := filepath.Join(t.TempDir(), "config.json")
	creds := fmt.Sprintf(`{"auths":{%q:{"auth":%q},%q:{"auth":%q}}}`,
		origin.host, base64.StdEncoding.EncodeToString([]byte("alice:wrong")),
		mirror.host, base64.StdEncoding.EncodeToString([]byte("bob:mirr0r")))
	if err := os.WriteFile(cfg, []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	s := openStore(t)
	p := NewPuller(s, PullConfig{HostsDir: hosts, CredentialPaths: []string{cfg}}, discardLogger())
	alice := &authn.AuthConfig{Username: "alice", Password: "s3cret"}

	// v1 is at the origin only: the mirror fails it, the origin takes the
	// pull's credential where the Docker config's is wrong.
	if _, err := p.Pull(t.Context(), origin.host+"/private/app:v1", nil); err == nil || !strings.Contains(err.Error(), "UNAUTHORIZED") {
		t.Fatalf("pull with the Docker config's wrong password: %v, want UNAUTHORIZED", err)
	}
	if _, err := p.PullWith(t.Context(), origin.host+"/private/app:v1", PullOptions{Auth: alice}); err != nil {
		t.Fatalf("pull with its own credential: %v", err)
	}
	// v2 is at the mirror only, which the Docker config's bob opens.
	if _, err := p.PullWith(t.Context(), origin.host+"/private/app:v2", PullOptions{Auth: alice}); err != nil {
		t.Fatalf("pull through the mirror: %v", err)
	}
	if leaked.Load() {
		t.Fatal("the mirror was sent the pull's own credential")
	}
	if authKey(alice) == authKey(&authn.AuthConfig{Username: "alice", Password: "other"}) {
		t.Fatal("two credentials share a pull key")
	}
}
