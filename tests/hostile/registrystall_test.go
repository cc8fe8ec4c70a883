package hostile

import (
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// stallRegistry is a registry on 127.0.0.1 that can trickle one blob.
type stallRegistry struct {
	addr string
	reg  http.Handler
	// asked counts the requests for anything.
	asked atomic.Int64
	// trickle, if set, is the digest of the blob sent one byte every
	// tick, with its whole Content-Length.
	trickle atomic.Pointer[string]
	blob    []byte
	tick    time.Duration
	// trickled counts the bytes of it sent, over every GET.
	trickled atomic.Int64
}

func newStallRegistry(t *testing.T) *stallRegistry {
	t.Helper()
	r := &stallRegistry{reg: registry.New(registry.Logger(log.New(io.Discard, "", 0)))}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = l.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(r.serve), ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
	return r
}

func (r *stallRegistry) serve(w http.ResponseWriter, req *http.Request) {
	r.asked.Add(1)
	d := r.trickle.Load()
	if d == nil || req.Method != http.MethodGet || !strings.HasSuffix(req.URL.Path, "/blobs/"+*d) {
		r.reg.ServeHTTP(w, req)
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(r.blob)))
	w.WriteHeader(http.StatusOK)
	tick := time.NewTicker(r.tick)
	defer tick.Stop()
	for i := range r.blob {
		if _, err := w.Write(r.blob[i : i+1]); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		r.trickled.Add(1)
		select {
		case <-req.Context().Done():
			return
		case <-tick.C:
		}
	}
}

// push writes img to the registry as repoTag.
func (r *stallRegistry) push(t *testing.T, repoTag string, img v1.Image) string {
	t.Helper()
	ref := r.addr + "/" + repoTag
	dst, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(dst, img); err != nil {
		t.Fatal(err)
	}
	return ref
}

// lastLayer is the digest and compressed content of img's last layer.
func lastLayer(t *testing.T, img v1.Image) (string, []byte) {
	t.Helper()
	ls, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	l := ls[len(ls)-1]
	d, err := l.Digest()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return d.String(), b
}

// registryConfig writes a registry config dir that sends each of addrs to
// itself over plain HTTP, and everything else where every test daemon's
// pulls go.
func registryConfig(t *testing.T, addrs ...string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs.d")
	def, err := os.ReadFile(filepath.Join(testdaemon.RegistryDir, "_default", "hosts.toml"))
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{"_default": string(def)}
	for _, a := range addrs {
		files[a] = fmt.Sprintf("server = %q\n", "http://"+a)
	}
	for host, body := range files {
		if err := os.MkdirAll(filepath.Join(dir, host), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, host, "hosts.toml"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const loopScript = "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"

// TestHostileRegistryStall: a registry trickles a layer one byte every
// 300 ms while a pod's image pull waits on it, with serializeImagePulls (the
// default, one pull at a time). A system-node-critical pod whose image is
// on another registry starts within seconds all the same, and so does one
// whose image is on the trickling registry itself; the trickled
// pull fails at its progress deadline, naming the blob, the host and the
// bytes, in the pod's status and its events, then backs off.
func TestHostileRegistryStall(t *testing.T) {
	t.Parallel()
	slow, fast := newStallRegistry(t), newStallRegistry(t)
	base := busybox(t, testdaemon.Image)
	// Layers of their own: the store of a test daemon has busybox's already.
	slowImg := imageOf(t, base, nil, []entry{{name: "slow.txt", body: "slow " + testdaemon.RandHex(8)}})
	critImg := imageOf(t, base, nil, []entry{{name: "critical.txt", body: "critical " + testdaemon.RandHex(8)}})
	slowRef := slow.push(t, "team/app:v1", slowImg)
	critRef := fast.push(t, "control/etcd:v1", critImg)
	// A critical pod's image on the trickling registry itself.
	sameImg := imageOf(t, base, nil, []entry{{name: "same.txt", body: "same " + testdaemon.RandHex(8)}})
	sameRef := slow.push(t, "control/apiserver:v1", sameImg)
	digest, blob := lastLayer(t, slowImg)
	slow.blob, slow.tick = blob, 300*time.Millisecond
	slow.trickle.Store(&digest)
	wholeTrickle := time.Duration(len(blob)) * slow.tick

	d := testdaemon.New(t)
	const deadline = 10 * time.Second
	d.Args = append(d.Args, "--registry-config-dir", registryConfig(t, slow.addr, fast.addr),
		"--image-pull-progress-timeout", deadline.String())
	d.Start()
	d.WriteManifest("slow.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: slow}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", %q]
`, slowRef, loopScript))
	d.Eventually(30*time.Second, "the slow registry trickling the layer", func() error {
		if n := slow.trickled.Load(); n < 2 {
			return fmt.Errorf("%d bytes trickled", n)
		}
		return nil
	})

	fastAsked := fast.asked.Load()
	began := time.Now()
	d.WriteManifest("critical.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: critical}
spec:
  priorityClassName: system-node-critical
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", %q]
`, critRef, loopScript))
	// Bound of the test: a critical pod that waited for the trickle would
	// start after it, wholeTrickle later, and one that waited for the slot
	// after the progress deadline.
	d.WaitRunning("critical", deadline/2)
	took := time.Since(began)
	t.Logf("critical pod: manifest to Running in %v while the other registry trickles a %d-byte layer (%v in all, %d bytes sent so far)",
		took.Round(10*time.Millisecond), len(blob), wholeTrickle, slow.trickled.Load())
	if fast.asked.Load() == fastAsked {
		t.Fatal("the critical pod's registry was never asked")
	}
	// serializeImagePulls holds the trickling registry's one slot: a
	// critical pod's pull from it takes none.
	began = time.Now()
	d.WriteManifest("critical-same.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: critical-same}
spec:
  priorityClassName: system-node-critical
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", %q]
`, sameRef, loopScript))
	d.WaitRunning("critical-same", deadline/2)
	t.Logf("critical pod of the trickling registry: manifest to Running in %v (%d bytes of the trickle sent so far)",
		time.Since(began).Round(10*time.Millisecond), slow.trickled.Load())
	if p := d.Pod("slow"); p == nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running != nil {
		t.Fatal("the slow pod runs: its layer was not trickled")
	}

	// The trickled pull fails at its progress deadline, with its reason.
	want := "blob " + digest + " from " + slow.addr + " stalled after "
	st := waitState(t, d, "slow", wholeTrickle/2, "ErrImagePull naming the stalled blob", func(st corev1.ContainerState) error {
		if st.Waiting == nil || (st.Waiting.Reason != "ErrImagePull" && st.Waiting.Reason != "ImagePullBackOff") || !strings.Contains(st.Waiting.Message, want) {
			return fmt.Errorf("state %+v, want ErrImagePull with %q", st, want)
		}
		return nil
	})
	t.Logf("slow pod: %s: %s", st.Waiting.Reason, st.Waiting.Message)
	if n := slow.trickled.Load(); n >= int64(len(blob)) {
		t.Fatalf("the whole layer (%d bytes) was sent before the pull failed", n)
	}
	if out := d.CLI("events", "-o", "json"); !strings.Contains(out, want) {
		t.Fatalf("no event names the stalled blob:\n%s", out)
	}
	// Then ImagePullBackOff, keeping the reason, as the kubelet's back-off.
	waitState(t, d, "slow", 30*time.Second, "ImagePullBackOff", waiting("ImagePullBackOff", want))
	if out := d.CLI("ps"); !strings.Contains(out, "ImagePullBackOff") {
		t.Fatalf("ps does not show the back-off:\n%s", out)
	}
	t.Logf("ps:\n%s", d.CLI("ps"))
}
