package tests

import (
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// pullRegistry is a registry on 127.0.0.1 of one test, which it can stop,
// start again on the same port, and make stall in the middle of a blob.
type pullRegistry struct {
	t    *testing.T
	addr string
	reg  http.Handler
	// stallAfter, when set, makes a blob GET stop after that many bytes
	// until release is closed (or the client goes).
	stallAfter atomic.Int64
	stalled    chan struct{}
	release    chan struct{}
	stallOnce  sync.Once

	// auth, when set, is the user:password every request must carry.
	auth atomic.Pointer[string]
	// hang, when set, makes every request whose path holds it wait for
	// the client to go, answering nothing: a registry that hangs.
	hang atomic.Pointer[string]
	// heads counts the HEAD requests of team/app's manifests: how often its tag was
	// resolved.
	heads atomic.Int64

	mu  sync.Mutex
	srv *http.Server
}

func newPullRegistry(t *testing.T) *pullRegistry {
	r := &pullRegistry{t: t, reg: registry.New(registry.Logger(log.New(io.Discard, "", 0))),
		stalled: make(chan struct{}), release: make(chan struct{})}
	r.up()
	t.Cleanup(r.down)
	return r
}

func (r *pullRegistry) up() {
	r.t.Helper()
	addr := r.addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		r.t.Fatal(err)
	}
	r.addr = l.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
}

func (r *pullRegistry) down() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.srv != nil {
		r.srv.Close()
		r.srv = nil
	}
}

func (r *pullRegistry) serve(w http.ResponseWriter, req *http.Request) {
	if a := r.auth.Load(); a != nil {
		u, p, _ := req.BasicAuth()
		if u+":"+p != *a {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprint(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`)
			return
		}
	}
	if req.Method == http.MethodHead && strings.Contains(req.URL.Path, "/team/app/manifests/") {
		r.heads.Add(1)
	}
	if h := r.hang.Load(); h != nil && strings.Contains(req.URL.Path, *h) {
		<-req.Context().Done()
		return
	}
	if r.stallAfter.Load() > 0 && req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
		w = &stallWriter{ResponseWriter: w, r: r, req: req}
	}
	r.reg.ServeHTTP(w, req)
}

// stallWriter passes a blob through until stallAfter bytes, then waits.
type stallWriter struct {
	http.ResponseWriter
	r   *pullRegistry
	req *http.Request
	n   int64
}

func (s *stallWriter) Write(b []byte) (int, error) {
	if after := s.r.stallAfter.Load(); after > 0 && s.n+int64(len(b)) > after {
		if f, ok := s.ResponseWriter.(http.Flusher); ok {
			f.Flush()
		}
		s.r.stallOnce.Do(func() { close(s.r.stalled) })
		select {
		case <-s.r.release:
		case <-s.req.Context().Done():
			return 0, s.req.Context().Err()
		}
	}
	n, err := s.ResponseWriter.Write(b)
	s.n += int64(n)
	return n, err
}

// push puts the image of a docker-archive into the registry as repo:tag and
// returns its config digest (the image ID the daemon reports).
// push writes the image of archive to r as repoTag, and returns the image's
// ID (its config digest) and the imageID a container of it reports, as
// containerd's CRI does: the repository digest, repository@sha256:… of the
// manifest.
func (r *pullRegistry) push(archive, repoTag string) (id, statusRef string) {
	r.t.Helper()
	img, err := tarball.ImageFromPath(archive, nil)
	if err != nil {
		r.t.Fatal(err)
	}
	dst, err := name.ParseReference(r.addr+"/"+repoTag, name.Insecure)
	if err != nil {
		r.t.Fatal(err)
	}
	if err := remote.Write(dst, img); err != nil {
		r.t.Fatal(err)
	}
	cfg, err := img.ConfigName()
	if err != nil {
		r.t.Fatal(err)
	}
	m, err := img.Digest()
	if err != nil {
		r.t.Fatal(err)
	}
	return cfg.String(), dst.Context().Name() + "@" + m.String()
}

// pullDaemon is a test daemon whose registry config sends r's host to r,
// over plain HTTP, and every other registry where every test daemon's go.
func pullDaemon(t *testing.T, r *pullRegistry) *daemon {
	t.Helper()
	d := newDaemon(t)
	dir := filepath.Join(d.Dir, "certs.d")
	for host, server := range map[string]string{"_default": "", r.addr: "http://" + r.addr} {
		if err := os.MkdirAll(filepath.Join(dir, host), 0o755); err != nil {
			t.Fatal(err)
		}
		body, err := os.ReadFile(filepath.Join(testdaemon.RegistryDir, "_default", "hosts.toml"))
		if err != nil {
			t.Fatal(err)
		}
		if server != "" {
			body = fmt.Appendf(nil, "server = %q\n", server)
		}
		if err := os.WriteFile(filepath.Join(dir, host, "hosts.toml"), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d.Args = append(d.Args, "--registry-config-dir", dir)
	return d
}

func appPod(name, image string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: main
    image: %s
`, name, image)
}

// loopCmd is an image command that runs until SIGTERM, saying which image it is.
func loopCmd(v string) string {
	return "sh,-c,echo " + v + "; trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"
}

func statusOf(p *corev1.Pod) corev1.ContainerStatus {
	if p == nil || len(p.Status.ContainerStatuses) == 0 {
		return corev1.ContainerStatus{}
	}
	return p.Status.ContainerStatuses[0]
}

// Under imagePullPolicy Always (the default of :latest), the restart of a
// container pulls again: the tag moved, the new container runs the new
// image; the pull of an unchanged tag fetches no layer.
func TestPullTagMovedUnderAlways(t *testing.T) {
	t.Parallel()
	r := newPullRegistry(t)
	d := pullDaemon(t, r)
	v1tar, v2tar := filepath.Join(d.Dir, "v1.tar"), filepath.Join(d.Dir, "v2.tar")
	buildImage(t, v1tar, "-ref", "app:v1", "-cmd", loopCmd("v1"))
	buildImage(t, v2tar, "-ref", "app:v2", "-cmd", loopCmd("v2"))
	id1, ref1 := r.push(v1tar, "team/app:latest")
	d.Start()
	image := r.addr + "/team/app:latest"
	d.WriteManifest("app.yaml", appPod("app", image))
	pod := d.WaitRunning("app", 60*time.Second)
	cs := statusOf(pod)
	if cs.ImageID != ref1 || cs.Image != image {
		t.Fatalf("status image %s, imageID %s; want %s, %s", cs.Image, cs.ImageID, image, ref1)
	}
	if !strings.Contains(d.CLI("logs", "app", "-c", "main"), "v1") {
		t.Fatalf("the container did not run v1")
	}
	_, ref2 := r.push(v2tar, "team/app:latest")
	// A running container is not replaced because its tag moved (the
	// kubelet neither); its restart pulls and runs the new image.
	// kill itself may die with the container (exit 137): what counts is the restart.
	d.CLIErr("exec", "app", "-c", "main", "--", "kill", "1")
	d.Eventually(60*time.Second, "the restarted container runs v2", func() error {
		cs := statusOf(d.Pod("app"))
		if cs.RestartCount != 1 || cs.State.Running == nil || cs.ImageID != ref2 {
			return fmt.Errorf("restarts %d, state %+v, imageID %s (v2 is %s)", cs.RestartCount, cs.State, cs.ImageID, ref2)
		}
		return nil
	})
	// The old image stays, named by its repo digest only, for image GC,
	// as containerd keeps it: a generation kept for a rollback may run it.
	if out := d.CLI("images", "ls"); !slices.ContainsFunc(strings.Split(out, "\n"), func(l string) bool {
		return strings.HasPrefix(l, "<none>") && strings.Contains(l, id1[7:19])
	}) {
		t.Errorf("the old image is not listed with no reference:\n%s", out)
	}
	// The pull's progress is in the log.
	d.WaitLine(10*time.Second, "pulling image")
}

// A registry that is down: the pod waits with ErrImagePull and the
// registry's error, then ImagePullBackOff; no other pod is touched; when the
// registry is back the pod starts at its next try.
func TestPullRegistryDownBackOff(t *testing.T) {
	t.Parallel()
	r := newPullRegistry(t)
	d := pullDaemon(t, r)
	tar := filepath.Join(d.Dir, "app.tar")
	buildImage(t, tar, "-ref", "app:v1", "-cmd", loopCmd("v1"))
	r.push(tar, "team/app:v1")
	r.down()
	d.Start()
	d.WriteManifest("other.yaml", sleeper("other", ""))
	other := d.WaitRunning("other", 60*time.Second)
	d.WriteManifest("app.yaml", appPod("app", r.addr+"/team/app:v1"))
	d.Eventually(60*time.Second, "ImagePullBackOff with the registry's error", func() error {
		w := statusOf(d.Pod("app")).State.Waiting
		if w == nil {
			return errors.New("not waiting")
		}
		if w.Reason != "ImagePullBackOff" {
			return fmt.Errorf("waiting %s: %s", w.Reason, w.Message)
		}
		if !strings.Contains(w.Message, "connection refused") || !strings.Contains(w.Message, "ErrImagePull") {
			return fmt.Errorf("message %q does not carry the registry's error", w.Message)
		}
		return nil
	})
	r.up()
	d.Eventually(90*time.Second, "the pod runs once the registry is back", func() error {
		cs := statusOf(d.Pod("app"))
		if cs.State.Running == nil {
			return fmt.Errorf("state %+v", cs.State)
		}
		return nil
	})
	after := statusOf(d.Pod("other"))
	if before := statusOf(other); after.ContainerID != before.ContainerID || after.RestartCount != 0 {
		t.Errorf("the other pod was touched: %s (%d restarts), was %s", after.ContainerID, after.RestartCount, before.ContainerID)
	}
	if out := d.CLI("events"); !strings.Contains(out, "Failed to pull image") {
		t.Errorf("no Failed event about the pull:\n%s", out)
	}
}

// kill -9 of the daemon in the middle of a layer leaves the store as it
// was: no image, no layer; the next daemon clears the staging and pulls
// again, and the pod runs.
func TestPullKilledMidLayer(t *testing.T) {
	t.Parallel()
	r := newPullRegistry(t)
	d := pullDaemon(t, r)
	tar := filepath.Join(d.Dir, "big.tar")
	buildImage(t, tar, "-ref", "big:v1", "-pad", fmt.Sprint(8<<20), "-cmd", loopCmd("big"))
	_, ref := r.push(tar, "team/big:v1")
	r.stallAfter.Store(2 << 20)
	layersBefore := countEntries(t, filepath.Join(d.RootDir, "images", "layers"))
	d.Start()
	d.WriteManifest("big.yaml", appPod("big", r.addr+"/team/big:v1"))
	select {
	case <-r.stalled:
	case <-time.After(60 * time.Second):
		t.Fatalf("the pull never reached the stall\n%s", d.Output())
	}
	if w := statusOf(d.Pod("big")).State.Waiting; w == nil || w.Reason != "ContainerCreating" || !strings.Contains(w.Message, "Pulling image") {
		t.Errorf("waiting during the pull: %+v", w)
	}
	d.Kill9()
	staging := filepath.Join(d.RootDir, "images", "tmp")
	if n := countEntries(t, staging); n == 0 {
		t.Errorf("no staging dir left by the killed pull: the test did not kill it mid-pull")
	}
	if out := d.CLI("images", "ls"); strings.Contains(out, "big") {
		t.Fatalf("a half-pulled image is listed:\n%s", out)
	}
	if n := countEntries(t, filepath.Join(d.RootDir, "images", "layers")); n != layersBefore {
		t.Fatalf("%d layers in the store after the killed pull, %d before", n, layersBefore)
	}
	r.stallAfter.Store(0)
	close(r.release)
	d.Start()
	pod := d.WaitRunning("big", 60*time.Second)
	if cs := statusOf(pod); cs.ImageID != ref {
		t.Errorf("imageID %s, want %s", cs.ImageID, ref)
	}
	if n := countEntries(t, staging); n != 0 {
		t.Errorf("%d staging dirs left after the next daemon's pull", n)
	}
}

// Credentials come from <root-dir>/config.json, read at each pull: a wrong
// password waits ErrImagePull (then ImagePullBackOff) with the registry's
// answer; the right one, written while the daemon runs, lets the pod start.
func TestPullCredentials(t *testing.T) {
	t.Parallel()
	r := newPullRegistry(t)
	d := pullDaemon(t, r)
	tar := filepath.Join(d.Dir, "app.tar")
	buildImage(t, tar, "-ref", "app:v1", "-cmd", loopCmd("v1"))
	r.push(tar, "private/app:v1")
	secret := "alice:s3cret"
	r.auth.Store(&secret)
	writeCreds := func(userPass string) {
		b := fmt.Appendf(nil, `{"auths":{%q:{"auth":%q}}}`, r.addr, base64.StdEncoding.EncodeToString([]byte(userPass)))
		if err := os.WriteFile(filepath.Join(d.RootDir, "config.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeCreds("alice:wrong")
	d.Start()
	d.WriteManifest("app.yaml", appPod("app", r.addr+"/private/app:v1"))
	d.Eventually(60*time.Second, "waiting on the registry's refusal", func() error {
		w := statusOf(d.Pod("app")).State.Waiting
		if w == nil || (w.Reason != "ErrImagePull" && w.Reason != "ImagePullBackOff") {
			return fmt.Errorf("waiting %+v", w)
		}
		if !strings.Contains(w.Message, "UNAUTHORIZED") || !strings.Contains(w.Message, r.addr) {
			return fmt.Errorf("message %q does not carry the registry's answer", w.Message)
		}
		return nil
	})
	writeCreds(secret)
	d.WaitRunning("app", 60*time.Second)
}

func countEntries(t *testing.T, dir string) int {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return len(ents)
}
