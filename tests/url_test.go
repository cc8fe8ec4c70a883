package tests

import (
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

type manifestServer = testdaemon.ManifestServer

func newManifestServer(t *testing.T, body string) *manifestServer {
	t.Helper()
	return testdaemon.NewManifestServer(t, body)
}

// sleeperList is a PodList of sleeper pods, each with env V=version, so a
// new version is an edit of every pod.
func sleeperList(version string, names ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: PodList\nitems:\n")
	for _, n := range names {
		fmt.Fprintf(&b, `- metadata: {name: %s}
  spec:
    terminationGracePeriodSeconds: 3
    containers:
    - name: main
      image: busybox
      env: [{name: V, value: %q}]
      command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`, n, version)
	}
	return b.String()
}

// useURL points the daemon's config at url, polled every second.
func useURL(t *testing.T, d *daemon, url string) {
	t.Helper()
	f, err := os.OpenFile(d.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "staticPodURL: %s\nhttpCheckFrequency: 1s\n", url)
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mainContainer is the status of the pod's container "main".
func mainContainer(t *testing.T, p *v1.Pod) v1.ContainerStatus {
	t.Helper()
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "main" {
			return cs
		}
	}
	t.Fatalf("pod %s has no container main", p.Name)
	return v1.ContainerStatus{}
}

// The URL source with the real daemon and real containers: an edit on the
// server replaces the pod; a down server stops nothing and says so in ps,
// /healthz?verbose and STATUS=; a change when it is back is applied; a daemon
// restarted while the server is down adopts the pods from the saved set and
// says READY=1 without waiting for the server; an empty PodList removes them.
func TestURLSource(t *testing.T) {
	t.Parallel()
	srv := newManifestServer(t, sleeperList("1", "web", "db"))
	d := newDaemon(t)
	t.Cleanup(func() { srv.Up(); srv.Set(sleeperList("0")) }) // before the daemon's cleanup
	useURL(t, d, srv.URL())
	metrics := newNodeMetrics(t, d)
	sock, path := newNotifySocket(t)
	d.Env = []string{"NOTIFY_SOCKET=" + path}
	d.Start()
	sock.next(t, "READY=1", 30*time.Second)

	web := d.WaitRunning("web", 30*time.Second)
	d.WaitRunning("db", 30*time.Second)
	if web.Annotations["kubernetes.io/config.source"] != "http" {
		t.Errorf("config.source = %q, want http", web.Annotations["kubernetes.io/config.source"])
	}
	healthz := fmt.Sprintf("http://127.0.0.1:%d/healthz", d.Port)
	if _, body := httpGet(t, healthz+"?verbose"); !strings.Contains(body, "[+]manifest-url ok") {
		t.Errorf("/healthz?verbose with the URL answering:\n%s", body)
	}

	// An edit on the server replaces the pods.
	srv.Set(sleeperList("2", "web", "db"))
	d.Eventually(30*time.Second, "web replaced by the edit", func() error {
		p := d.Pod("web")
		if p == nil || p.UID == web.UID || p.Status.Phase != v1.PodRunning {
			return fmt.Errorf("web is %v", p)
		}
		return nil
	})
	web = d.WaitRunning("web", 30*time.Second)
	before := mainContainer(t, web)
	pid := containerPID(d, web, "main")

	// The server goes down: the pods keep running; ps, /healthz?verbose and
	// STATUS= say why.
	srv.Down()
	reason := srv.URL() + ": dial: connection refused"
	d.Eventually(15*time.Second, "the problem in ps", func() error {
		if out := d.CLI("ps"); !strings.Contains(out, "Manifest problems:\n  "+srv.URL()+": dial: connection refused") {
			return fmt.Errorf("ps:\n%s", out)
		}
		return nil
	})
	if code, body := httpGet(t, healthz); code != 200 || body != "ok" {
		t.Errorf("/healthz while the URL fails = %d %q, want 200 ok", code, body)
	}
	if _, body := httpGet(t, healthz+"?verbose"); !strings.Contains(body, "[-]manifest-url failed since ") ||
		!strings.Contains(body, reason) || !strings.HasSuffix(body, "healthz check passed\n") {
		t.Errorf("/healthz?verbose while the URL fails:\n%s", body)
	}
	sock.next(t, "manifest URL "+reason, 15*time.Second)
	// Three failed polls, the pods untouched all along.
	webUnchanged := func() error {
		p := d.Pod("web")
		if p == nil {
			return errors.New("web is gone while the server is down")
		}
		if after := mainContainer(t, p); after.ContainerID != before.ContainerID || after.RestartCount != 0 || !procAlive(pid) {
			return fmt.Errorf("web's container changed while the server was down: %s restarts %d (was %s), pid %d alive %v",
				after.ContainerID, after.RestartCount, before.ContainerID, pid, procAlive(pid))
		}
		return nil
	}
	metrics.await("failed URL requests", failedURLRequests, 3, 15*time.Second, webUnchanged)
	if err := webUnchanged(); err != nil {
		t.Error(err)
	}
	failed := d.WaitOutput(10*time.Second, "the failure logged", func(out string) bool {
		return strings.Contains(out, "cannot read pods from the manifest URL")
	})
	if n := strings.Count(failed, "cannot read pods from the manifest URL"); n != 1 {
		t.Errorf("the failure was logged %d times over several polls, want once:\n%s", n, failed)
	}

	// Back with a change: applied.
	srv.Set(sleeperList("3", "web", "db"))
	srv.Up()
	d.Eventually(30*time.Second, "web replaced after the server came back", func() error {
		p := d.Pod("web")
		if p == nil || p.UID == web.UID || p.Status.Phase != v1.PodRunning {
			return fmt.Errorf("web is %v", p)
		}
		return nil
	})
	// db is replaced too, maybe after web: wait for its new generation.
	d.Eventually(30*time.Second, "db replaced after the server came back", func() error {
		p := d.Pod("db")
		if p == nil || len(p.Spec.Containers) == 0 || len(p.Spec.Containers[0].Env) == 0 ||
			p.Spec.Containers[0].Env[0].Value != "3" || p.Status.Phase != v1.PodRunning {
			return fmt.Errorf("db is %v", p)
		}
		return nil
	})
	web = d.WaitRunning("web", 30*time.Second)
	db := d.WaitRunning("db", 30*time.Second)
	if out := d.CLI("ps"); strings.Contains(out, "Manifest problems") {
		t.Errorf("a problem left after the server came back:\n%s", out)
	}

	// A restart while the server is down: the saved set is the URL's first
	// snapshot, the pods are adopted, not restarted, and READY=1 comes
	// without waiting for the server.
	srv.Down()
	pid = containerPID(d, web, "main")
	d.Signal(syscall.SIGTERM)
	<-d.Exited()
	t0 := time.Now()
	d.Start()
	sock.next(t, "READY=1", 30*time.Second)
	if took := time.Since(t0); took > 10*time.Second {
		t.Errorf("READY=1 %s after the start with the server down", took.Round(time.Millisecond))
	}
	for _, want := range []*v1.Pod{web, db} {
		p := d.Pod(strings.TrimSuffix(want.Name, "-"+d.Name))
		if p == nil || p.UID != want.UID || mainContainer(t, p).ContainerID != mainContainer(t, want).ContainerID {
			t.Fatalf("after the restart %s is %v, want it adopted as it ran", want.Name, p)
		}
	}
	if !procAlive(pid) || mainContainer(t, d.Pod("web")).RestartCount != 0 {
		t.Error("web's container did not survive the restart as it was")
	}
	// The daemon says where the pods came from.
	d.WaitLine(10*time.Second, "loaded the last good set of the manifest URL")

	// An empty PodList removes the URL's pods.
	srv.Set(sleeperList("4"))
	srv.Up()
	d.Eventually(60*time.Second, "the URL's pods removed", func() error {
		if pods := d.Pods(); len(pods) > 0 {
			return fmt.Errorf("%d pods left", len(pods))
		}
		return nil
	})
}

// https with a private CA given by --manifest-url-ca, headers sent.
func TestURLSourceTLS(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var auth string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		auth = r.Header.Get("Authorization")
		body := sleeperList("1", "tls")
		if r.Header.Get("X-Gone") != "" {
			body = sleeperList("0")
		}
		mu.Unlock()
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	d := newDaemon(t)
	ca := filepath.Join(d.Dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	useURL(t, d, srv.URL+"/pods")
	d.Args = []string{"--manifest-url-ca", ca, "--manifest-url-header", "Authorization:Bearer sesame"}
	t.Cleanup(func() { // the daemon's cleanup comes next: the pod must go
		d.Stop()
		d.Args = append(d.Args, "--manifest-url-header", "X-Gone:1")
	})
	d.Start()
	d.WaitRunning("tls", 30*time.Second)
	mu.Lock()
	if auth != "Bearer sesame" {
		t.Errorf("Authorization = %q", auth)
	}
	mu.Unlock()

	out := d.CLI("config", "--config", d.Config, "--manifest-url-ca", ca, "--manifest-url-header", "Authorization:Bearer sesame")
	for _, want := range []string{"manifestURLCA", ca, "flag --manifest-url-ca", "Authorization=(redacted)", srv.URL + "/pods"} {
		if !strings.Contains(out, want) {
			t.Errorf("config lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "sesame") {
		t.Errorf("config shows a header value:\n%s", out)
	}
}
