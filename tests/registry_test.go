package tests

import (
	"archive/tar"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/crypto/bcrypt"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// distRegistry is Docker's registry (distribution, Debian's docker-registry
// package) run by a test on 127.0.0.1, over TLS with a CA of the test's own
// and htpasswd basic auth, or over plain HTTP with no auth.
type distRegistry struct {
	t          *testing.T
	addr       string // 127.0.0.1:port
	caFile     string
	user, pass string
	client     *http.Client // trusts the CA

	mu       sync.Mutex
	stdout   bytes.Buffer // the access log
	stderr   bytes.Buffer
	cmd      *exec.Cmd
	exited   chan struct{}
	exitErr  error
	stopOnce sync.Once
}

// registryBin finds docker-registry. Without it the test is skipped only
// outside CI: under STATICPODD_TEST_ROOT=1 it must be installed.
func registryBin(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("docker-registry")
	if err == nil {
		return bin
	}
	if os.Getenv("STATICPODD_TEST_ROOT") == "" {
		t.Skip("docker-registry is not installed (Debian: apt-get install docker-registry); it is required under STATICPODD_TEST_ROOT=1")
	}
	t.Fatalf("docker-registry is not installed (Debian: apt-get install docker-registry): %v", err)
	return ""
}

// startDistRegistry writes the registry's CA, certificate, htpasswd and
// config under a temporary dir and starts it on a free port, again on
// another port if that one was taken in the meantime.
func startDistRegistry(t *testing.T, bin string) *distRegistry {
	t.Helper()
	return startDistRegistryWith(t, bin, true)
}

// startDistRegistryWith starts the registry over TLS with basic auth, or,
// without secure, over plain HTTP with neither.
func startDistRegistryWith(t *testing.T, bin string, secure bool) *distRegistry {
	t.Helper()
	dir := t.TempDir()
	r := &distRegistry{t: t}
	var tlsAuth string
	if secure {
		r.user, r.pass = "alice", "s3cret-"+testdaemon.RandHex(4)
		caPEM, certPEM, keyPEM := testCerts(t)
		r.caFile = filepath.Join(dir, "ca.pem")
		certFile, keyFile := filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
		hash, err := bcrypt.GenerateFromPassword([]byte(r.pass), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		htpasswd := filepath.Join(dir, "htpasswd")
		for f, b := range map[string][]byte{r.caFile: caPEM, certFile: certPEM, keyFile: keyPEM,
			htpasswd: fmt.Appendf(nil, "%s:%s\n", r.user, hash)} {
			if err := os.WriteFile(f, b, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(caPEM)
		r.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: pool}, DisableKeepAlives: true}}
		tlsAuth = fmt.Sprintf(`  tls: {certificate: %s, key: %s}
auth:
  htpasswd: {realm: staticpodd-test, path: %s}
`, certFile, keyFile, htpasswd)
	} else {
		r.client = &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	}
	storage := filepath.Join(dir, "storage")
	for try := 0; ; try++ {
		r.addr = fmt.Sprintf("127.0.0.1:%d", testdaemon.FreePort(t))
		config := filepath.Join(dir, "config.yml")
		cfg := fmt.Sprintf(`version: 0.1
log:
  level: info
  accesslog: {disabled: false}
storage:
  filesystem: {rootdirectory: %s}
  delete: {enabled: true}
http:
  addr: %s
  secret: %s
%s`, storage, r.addr, testdaemon.RandHex(16), tlsAuth)
		if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		err := r.start(bin, config)
		if err == nil {
			t.Cleanup(r.stop)
			return r
		}
		if try < 5 && strings.Contains(r.Stderr(), "address already in use") {
			continue
		}
		t.Fatalf("docker-registry on %s: %v\n%s", r.addr, err, r.Stderr())
	}
}

// start runs the registry and waits until GET /v2/ answers 401, its
// request for credentials (200 without credentials configured).
func (r *distRegistry) start(bin, config string) error {
	r.mu.Lock()
	r.stdout.Reset()
	r.stderr.Reset()
	r.mu.Unlock()
	cmd := exec.Command(bin, "serve", config)
	// Killed with the test binary too, which a panic ends without Cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Stdout = lockedWriter{&r.mu, &r.stdout}
	cmd.Stderr = lockedWriter{&r.mu, &r.stderr}
	if err := cmd.Start(); err != nil {
		return err
	}
	r.cmd, r.exited, r.stopOnce = cmd, make(chan struct{}), sync.Once{}
	go func(exited chan struct{}) { r.exitErr = cmd.Wait(); close(exited) }(r.exited)
	scheme, want := "https", http.StatusUnauthorized
	if r.user == "" {
		scheme, want = "http", http.StatusOK
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := r.client.Get(scheme + "://" + r.addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == want {
				return nil
			}
			err = fmt.Errorf("GET /v2/: %s, want %d", resp.Status, want)
		}
		select {
		case <-r.exited:
			return fmt.Errorf("exited: %v", r.exitErr)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			r.stop()
			return err
		}
	}
}

func (r *distRegistry) stop() {
	r.stopOnce.Do(func() {
		r.cmd.Process.Kill()
		<-r.exited
	})
}

func (r *distRegistry) Stderr() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stderr.String()
}

// requests counts the access log's GETs whose path matches re.
func (r *distRegistry) requests(re string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(regexp.MustCompile(`"GET /v2/`+re+` HTTP/`).FindAllIndex(r.stdout.Bytes(), -1))
}

// push writes img as repoTag (team/app:v1) with the registry's credentials.
func (r *distRegistry) push(img v1.Image, repoTag string) {
	r.t.Helper()
	ref, err := name.ParseReference(r.addr + "/" + repoTag)
	if err != nil {
		r.t.Fatal(err)
	}
	var auth authn.Authenticator = authn.Anonymous
	if r.user != "" {
		auth = &authn.Basic{Username: r.user, Password: r.pass}
	}
	err = remote.Write(ref, img, remote.WithAuth(auth), remote.WithTransport(r.client.Transport))
	if err != nil {
		r.t.Fatalf("push %s: %v\n%s", ref, err, r.Stderr())
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// testCerts makes a CA and a certificate for 127.0.0.1 it signs, in PEM.
func testCerts(t *testing.T) (caPEM, certPEM, keyPEM []byte) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "staticpodd test CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	leaf := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
	}
	caCert, err := x509.ParseCertificate(caDER)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, caCert, &key.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}

// fileLayer is a layer holding files (path → content).
func fileLayer(t *testing.T, files map[string][]byte) v1.Layer {
	t.Helper()
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for p, content := range files {
		hdr := &tar.Header{Name: p, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(content); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b.Bytes())), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// readyPod is a pod whose container copies the image's /version to
// /ready/<name> (a host dir), its own signal that it runs, then waits.
func readyPod(name, image, readyDir string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 3
  volumes:
  - name: ready
    hostPath: {path: %s}
  containers:
  - name: main
    image: %s
    imagePullPolicy: Always
    command: ["sh", "-c", "cp /version /ready/%s.tmp && mv /ready/%s.tmp /ready/%s; trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    volumeMounts:
    - {name: ready, mountPath: /ready}
`, name, readyDir, image, name, name, name)
}

// Pulls from Docker's own registry (distribution) over TLS with basic auth,
// through a daemon configured as an appliance would be: a hosts.toml with
// the registry's CA, a Docker config.json with the credentials, a hosts.toml
// making the registry docker.io's mirror.
func TestPullDistributionRegistry(t *testing.T) {
	t.Parallel()
	bin := registryBin(t)
	d := newDaemon(t)
	r := startDistRegistry(t, bin)

	// Three layers: busybox, a data layer both images share, and a layer
	// of each image's own telling which it is.
	base, err := tarball.ImageFromPath(testdaemon.Image, nil)
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 256<<10)
	rand.Read(data)
	shared := fileLayer(t, map[string][]byte{"data": data})
	image := func(version string) v1.Image {
		img, err := mutate.AppendLayers(base, shared, fileLayer(t, map[string][]byte{"version": []byte(version)}))
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	app := image("app-v1")
	r.push(app, "team/app:v1")
	mirrored := "mirrored-" + testdaemon.RandHex(4)
	r.push(image("mirror-v1"), "library/"+mirrored+":v1")

	// The registry config: the registry itself with its CA (relative to its
	// hosts.toml), docker.io with the registry as its mirror, every other
	// registry where every test daemon's goes.
	certs := filepath.Join(d.Dir, "certs.d")
	defaultHosts, err := os.ReadFile(filepath.Join(testdaemon.RegistryDir, "_default", "hosts.toml"))
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(r.caFile)
	if err != nil {
		t.Fatal(err)
	}
	for file, body := range map[string]string{
		"_default/hosts.toml":  string(defaultHosts),
		r.addr + "/hosts.toml": fmt.Sprintf("server = %q\nca = \"ca.pem\"\n", "https://"+r.addr),
		r.addr + "/ca.pem":     string(caPEM),
		// Docker Hub itself has no capability: the test never leaves the
		// loopback, even when the mirror fails.
		"docker.io/hosts.toml": fmt.Sprintf(`server = "https://registry-1.docker.io"
capabilities = []

[host.%q]
  capabilities = ["pull", "resolve"]
  ca = %q
`, "https://"+r.addr, r.caFile),
	} {
		p := filepath.Join(certs, file)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.Args = append(d.Args, "--registry-config-dir", certs)
	writeCreds := func(pass string) {
		b := fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, r.addr, base64.StdEncoding.EncodeToString([]byte(r.user+":"+pass)))
		if err := os.WriteFile(filepath.Join(d.RootDir, "config.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCreds(r.pass)
	readyDir := filepath.Join(d.Dir, "ready")
	if err := os.MkdirAll(readyDir, 0o755); err != nil {
		t.Fatal(err)
	}
	waitReady := func(pod, want string) {
		d.T.Helper()
		d.Eventually(60*time.Second, pod+" says it runs "+want, func() error {
			b, err := os.ReadFile(filepath.Join(readyDir, pod))
			if err != nil {
				return fmt.Errorf("%v; pod %+v", err, statusOf(d.Pod(pod)).State)
			}
			if string(b) != want {
				return fmt.Errorf("it runs %q", b)
			}
			// The container writes its file before the worker publishes
			// the start: what follows reads the status.
			if st := statusOf(d.Pod(pod)).State; st.Running == nil {
				return fmt.Errorf("it runs %q, status not yet running: %+v", b, st)
			}
			return nil
		})
	}
	d.Start()
	appRef := r.addr + "/team/app:v1"
	// step runs a subtest with the daemon's failures its own.
	step := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) {
			parent := d.T
			d.T = t
			defer func() { d.T = parent }()
			f(t)
		})
	}

	step("pull", func(t *testing.T) {
		d.WriteManifest("app.yaml", readyPod("app", appRef, readyDir))
		waitReady("app", "app-v1")
		digest, err := app.Digest()
		if err != nil {
			t.Fatal(err)
		}
		// imageID is the repository digest, as containerd's CRI reports it.
		id := r.addr + "/team/app@" + digest.String()
		if cs := statusOf(d.Pod("app")); cs.ImageID != id || cs.Image != appRef {
			t.Errorf("status image %s, imageID %s; want %s, %s", cs.Image, cs.ImageID, appRef, id)
		}
		out := d.CLI("images", "ls", "--digests")
		if !regexp.MustCompile(regexp.QuoteMeta(appRef) + `\s+` + regexp.QuoteMeta(digest.String()) + `\s`).MatchString(out) {
			t.Errorf("images ls --digests does not show %s pulled by %s:\n%s", appRef, digest, out)
		}
		// The config and two of the three layers, once each: busybox's
		// layer is in the store already (every test daemon imports it).
		if n := r.requests(`team/app/blobs/[^ ]+`); n != 3 {
			t.Errorf("%d blob GETs, want 3 (the config, the shared and the version layers)", n)
		}
	})

	step("repull is a no-op", func(t *testing.T) {
		blobs, manifests := r.requests(`[^ ]+/blobs/[^ ]+`), r.requests(`team/app/manifests/v1`)
		if err := os.Remove(filepath.Join(readyDir, "app")); err != nil {
			t.Fatal(err)
		}
		// The restart pulls again under Always: the manifest only.
		d.CLIErr("exec", "app", "-c", "main", "--", "kill", "1")
		waitReady("app", "app-v1")
		d.Eventually(10*time.Second, "the status counts the restart", func() error {
			if cs := statusOf(d.Pod("app")); cs.RestartCount != 1 {
				return fmt.Errorf("%d restarts, want 1", cs.RestartCount)
			}
			return nil
		})
		d.Eventually(10*time.Second, "the restart asked the registry for the manifest", func() error {
			if n := r.requests(`team/app/manifests/v1`); n <= manifests {
				return fmt.Errorf("%d manifest GETs, %d before", n, manifests)
			}
			return nil
		})
		if n := r.requests(`[^ ]+/blobs/[^ ]+`); n != blobs {
			t.Errorf("the re-pull fetched %d blobs", n-blobs)
		}
	})

	step("wrong credentials", func(t *testing.T) {
		writeCreds("wrong")
		d.WriteManifest("creds.yaml", readyPod("creds", appRef, readyDir))
		d.Eventually(60*time.Second, "waiting on the registry's refusal", func() error {
			w := statusOf(d.Pod("creds")).State.Waiting
			if w == nil || (w.Reason != "ErrImagePull" && w.Reason != "ImagePullBackOff") {
				return fmt.Errorf("waiting %+v", w)
			}
			if !strings.Contains(w.Message, "UNAUTHORIZED") || !strings.Contains(w.Message, r.addr) {
				return fmt.Errorf("message %q does not carry the registry's answer", w.Message)
			}
			return nil
		})
		writeCreds(r.pass)
		waitReady("creds", "app-v1")
		if cs := statusOf(d.Pod("app")); cs.RestartCount != 1 || cs.State.Running == nil {
			t.Errorf("the other pod was touched: %d restarts, state %+v", cs.RestartCount, cs.State)
		}
	})

	step("docker.io mirror", func(t *testing.T) {
		d.WriteManifest("mirror.yaml", readyPod("mirror", mirrored+":v1", readyDir))
		waitReady("mirror", "mirror-v1")
		if n := r.requests(`library/` + mirrored + `/manifests/v1`); n == 0 {
			t.Errorf("the mirror was not asked for the manifest")
		}
		want := "docker.io/library/" + mirrored + ":v1"
		if cs := statusOf(d.Pod("mirror")); cs.Image != want {
			t.Errorf("status image %s, want %s", cs.Image, want)
		}
		if out := d.CLI("images", "ls"); !strings.Contains(out, want) {
			t.Errorf("images ls does not list %s:\n%s", want, out)
		}
		// Only the mirror's own layer and config: busybox and the shared
		// layer are in the store already.
		if n := r.requests(`library/` + mirrored + `/blobs/[^ ]+`); n != 2 {
			t.Errorf("%d blob GETs from the mirror, want 2 (its own layer and config)", n)
		}
	})

	if t.Failed() {
		t.Logf("registry's log:\n%s", r.Stderr())
	}
	for _, f := range []string{"app.yaml", "creds.yaml", "mirror.yaml"} {
		d.RemoveManifest(f)
	}
	d.Eventually(30*time.Second, "the pods are gone", func() error {
		if n := len(d.Pods()); n != 0 {
			return fmt.Errorf("%d pods", n)
		}
		return nil
	})
	d.AssertNoLeaks()
}
