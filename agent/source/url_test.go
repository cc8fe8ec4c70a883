package source

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

func urlPod(name, image string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: c\n    image: %s\n", name, image)
}

// urlList is a PodList in JSON of pods named after names, image busybox.
func urlList(names ...string) string {
	items := make([]string, 0, len(names))
	for _, n := range names {
		items = append(items, fmt.Sprintf(`{"metadata":{"name":%q},"spec":{"containers":[{"name":"c","image":"busybox"}]}}`, n))
	}
	return `{"apiVersion":"v1","kind":"PodList","items":[` + strings.Join(items, ",") + `]}`
}

// served is what a test server answers: a status and a body, changed at will,
// and how many requests it answered.
type served struct {
	mu      sync.Mutex
	status  int
	body    string
	header  http.Header // of the last request
	handler http.HandlerFunc
	hits    atomic.Int64
}

func (s *served) set(status int, body string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status, s.body, s.handler = status, body, nil
}

func (s *served) setHandler(h http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
}

func (s *served) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer s.hits.Add(1)
	s.mu.Lock()
	status, body, h := s.status, s.body, s.handler
	s.header = r.Header.Clone()
	s.mu.Unlock()
	if h != nil {
		h(w, r)
		return
	}
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// waitHits waits until the server has answered n requests in all. A source
// polls one request at a time and sends what it made of one before it asks
// again, so every update of the first n-1 answers has been sent by then.
func (s *served) waitHits(t *testing.T, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for s.hits.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("the server answered %d requests in 10s, want %d", s.hits.Load(), n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func newServed(t *testing.T, status int, body string) (*served, *httptest.Server) {
	s := &served{status: status, body: body}
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

// logBuffer is a slog handler's output, safe to read while the source logs.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) count(substr string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Count(b.buf.String(), substr)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type urlRun struct {
	stop func() // ends Run and waits for it
	src  *URL
	ch   chan Update
	logs *logBuffer
	// statuses are the values OnChange was called with.
	mu       sync.Mutex
	statuses []URLStatus
}

// startURL runs a URL source with cfg (URL, period and so on set by the
// caller) and returns its updates.
func startURL(t *testing.T, cfg URLConfig) *urlRun {
	t.Helper()
	r := &urlRun{ch: make(chan Update), logs: &logBuffer{}}
	var w io.Writer = r.logs
	if testing.Verbose() {
		w = io.MultiWriter(r.logs, os.Stderr)
	}
	if cfg.NodeName == "" {
		cfg.NodeName = "node1"
	}
	if cfg.Seen == nil {
		cfg.Seen = func(types.UID) time.Time { return seenAt }
	}
	cfg.OnChange = func(st URLStatus) {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.statuses = append(r.statuses, st)
	}
	r.src = NewURL(cfg, slog.New(slog.NewTextHandler(w, nil)))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.src.Run(ctx, r.ch) }()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
	t.Cleanup(r.stop)
	return r
}

// collect reads every update into a list until the test ends.
func (r *urlRun) collect(t *testing.T) func() []Update {
	var mu sync.Mutex
	var got []Update
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case u := <-r.ch:
				mu.Lock()
				got = append(got, u)
				mu.Unlock()
			case <-stop:
				return
			}
		}
	}()
	t.Cleanup(func() { close(stop); <-done })
	return func() []Update {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(got)
	}
}

func (r *urlRun) next(t *testing.T) Update {
	t.Helper()
	select {
	case u := <-r.ch:
		return u
	case <-time.After(10 * time.Second):
		t.Fatalf("no update within 10s; log:\n%s", r.logs)
		return Update{}
	}
}

func (r *urlRun) waitFor(t *testing.T, what string, ok func(Update) bool) Update {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		select {
		case u := <-r.ch:
			if ok(u) {
				return u
			}
		case <-deadline:
			t.Fatalf("no update with %s within 10s; log:\n%s", what, r.logs)
		}
	}
}

func podNames(u Update) []string {
	var n []string
	for _, p := range u.Pods {
		n = append(n, p.Name)
	}
	slices.Sort(n)
	return n
}

func problemText(u Update) string {
	var s []string
	for _, p := range u.Problems {
		s = append(s, p.Err.Error())
	}
	return strings.Join(s, "; ")
}

// hasProblem is an update with the pods want and a problem containing substr.
func hasProblem(substr string, want ...string) func(Update) bool {
	return func(u Update) bool {
		return slices.Equal(podNames(u), want) && len(u.Problems) == 1 && strings.Contains(problemText(u), substr)
	}
}

func withPods(want ...string) func(Update) bool {
	return func(u Update) bool { return slices.Equal(podNames(u), want) && len(u.Problems) == 0 }
}

const fast = 20 * time.Millisecond

func TestURLPodAndPodList(t *testing.T) {
	s, srv := newServed(t, 200, urlPod("web", "busybox"))
	r := startURL(t, URLConfig{URL: srv.URL + "/pods", Period: fast,
		Header: http.Header{"Authorization": {"Bearer sesame"}}})

	u := r.next(t)
	if u.Source != manifest.SourceHTTP || !withPods("web-node1")(u) {
		t.Fatalf("first update: source %q, pods %v, problems %q", u.Source, podNames(u), problemText(u))
	}
	p := u.Pods[0]
	if p.Annotations[manifest.AnnotationSource] != "http" || p.Origin != srv.URL+"/pods" || len(p.UID) != 32 {
		t.Errorf("pod: source annotation %q, origin %q, uid %q", p.Annotations[manifest.AnnotationSource], p.Origin, p.UID)
	}
	if got := p.Annotations[manifest.AnnotationSeen]; got != seenAt.Format(time.RFC3339Nano) {
		t.Errorf("config.seen = %q", got)
	}
	s.mu.Lock()
	auth := s.header.Get("Authorization")
	s.mu.Unlock()
	if auth != "Bearer sesame" {
		t.Errorf("Authorization sent = %q", auth)
	}

	s.set(200, urlList("a", "b"))
	u = r.waitFor(t, "the list", withPods("a-node1", "b-node1"))
	if u.Pods[0].UID == u.Pods[1].UID {
		t.Error("two pods of a list share a UID")
	}

	// The same list as YAML: the same pods, UIDs included.
	s.set(200, "apiVersion: v1\nkind: PodList\nitems:\n- metadata: {name: a}\n  spec:\n    containers: [{name: c, image: busybox}]\n- metadata: {name: b}\n  spec:\n    containers: [{name: c, image: busybox}]\n")
	s.waitHits(t, s.hits.Load()+2)
	s.set(200, urlList("a"))
	u2 := r.waitFor(t, "a alone", withPods("a-node1"))
	if u2.Pods[0].UID != u.Pods[0].UID {
		t.Errorf("pod a changed UID from %s to %s with the same content", u.Pods[0].UID, u2.Pods[0].UID)
	}
}

// The kubelet takes all of a list or none of it: one invalid item leaves the
// last good set in place, reported as a problem.
func TestURLPodListAllOrNothing(t *testing.T) {
	s, srv := newServed(t, 200, urlList("a", "b"))
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast})
	good := r.waitFor(t, "a and b", withPods("a-node1", "b-node1"))

	bad := strings.Replace(urlList("a", "b", "c"), `{"name":"c"},"spec":{"containers":[{"name":"c","image":"busybox"}]}`,
		`{"name":"c"},"spec":{"containers":[{"name":"c"}]}`, 1)
	s.set(200, bad)
	u := r.waitFor(t, "the problem", hasProblem("items[2].spec.containers[0].image", "a-node1", "b-node1"))
	if u.Problems[0].Origin != srv.URL {
		t.Errorf("problem origin = %q", u.Problems[0].Origin)
	}
	for i := range good.Pods {
		if u.Pods[i].UID != good.Pods[i].UID {
			t.Errorf("kept pod %s changed UID", u.Pods[i].Name)
		}
	}
	// The same bad bytes again: not parsed again, not logged again.
	s.waitHits(t, s.hits.Load()+3)
	if n := r.logs.count("unusable pods from the manifest URL"); n != 1 {
		t.Errorf("the invalid list was logged %d times, want once:\n%s", n, r.logs)
	}
	s.set(200, urlList("a"))
	r.waitFor(t, "a alone", withPods("a-node1"))
}

// Identical bytes cause no work: no parse, no update, no status change.
func TestURLIdenticalBytesSendNothing(t *testing.T) {
	s, srv := newServed(t, 200, urlList("a", "b"))
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast})
	got := r.collect(t)
	s.waitHits(t, 6)
	if n := len(got()); n != 1 {
		t.Fatalf("%d updates over 5 polls of the same bytes, want 1", n)
	}
	if n := r.logs.count(`msg="pods from the manifest URL"`); n != 1 {
		t.Errorf("the set was parsed or logged %d times, want once:\n%s", n, r.logs)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.statuses) != 0 {
		t.Errorf("OnChange called %d times", len(r.statuses))
	}
}

// A failing server never takes the pods away; it is a problem until it
// answers again.
func TestURLFailuresKeepTheSet(t *testing.T) {
	s, srv := newServed(t, 200, urlList("a"))
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast})
	r.waitFor(t, "a", withPods("a-node1"))

	s.set(503, "busy")
	r.waitFor(t, "HTTP 503", hasProblem(srv.URL+": HTTP 503 Service Unavailable", "a-node1"))
	st := r.src.Status()
	if st.Err == nil || st.URL != srv.URL || st.Since.IsZero() {
		t.Errorf("Status = %+v", st)
	}

	s.set(200, "")
	r.waitFor(t, "an empty body", hasProblem("empty body", "a-node1"))
	s.set(200, "{")
	r.waitFor(t, "garbage", hasProblem("not YAML or JSON", "a-node1"))
	s.set(200, `{"apiVersion":"v1","kind":"Deployment"}`)
	r.waitFor(t, "a Deployment", hasProblem(`kind: Unsupported value: "Deployment"`, "a-node1"))
	s.set(404, "")
	r.waitFor(t, "HTTP 404", hasProblem("HTTP 404 Not Found", "a-node1"))

	// Back: the same set, the problem gone.
	s.set(200, urlList("a"))
	r.waitFor(t, "a without problem", withPods("a-node1"))
	if st := r.src.Status(); st.Err != nil {
		t.Errorf("Status after recovery = %+v", st)
	}
	// An explicit empty list removes the pods.
	s.set(200, urlList())
	u := r.waitFor(t, "no pods", withPods())
	if u.Pods == nil {
		t.Error("an empty set must be a non-nil empty list")
	}
}

func TestURLServerGone(t *testing.T) {
	s, srv := newServed(t, 200, urlList("a"))
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast})
	r.waitFor(t, "a", withPods("a-node1"))
	_ = s
	srv.Close()
	r.waitFor(t, "connection refused", hasProblem("dial: connection refused", "a-node1"))
}

func TestURLDNSFailure(t *testing.T) {
	r := startURL(t, URLConfig{URL: "http://staticpodd-test.invalid/pods", Period: time.Hour})
	u := r.next(t)
	if len(u.Pods) != 0 || !strings.Contains(problemText(u), "DNS lookup of staticpodd-test.invalid") {
		t.Fatalf("first update: pods %v, problems %q", podNames(u), problemText(u))
	}
}

func TestURLBodies(t *testing.T) {
	big := manifest.MaxSize + 1
	for _, tc := range []struct {
		name    string
		handler http.HandlerFunc
		want    string
	}{
		{"never-ending body", func(w http.ResponseWriter, r *http.Request) {
			chunk := bytes.Repeat([]byte("# padding\n"), 4096)
			for {
				if _, err := w.Write(chunk); err != nil {
					return
				}
			}
		}, fmt.Sprintf("body larger than %d bytes; cut off there", manifest.MaxSize)},
		{"announced too large", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", fmt.Sprint(big))
			w.Write([]byte("apiVersion: v1\n"))
		}, fmt.Sprintf("body of %d bytes is larger than %d bytes", big, manifest.MaxSize)},
		{"slow body", func(w http.ResponseWriter, r *http.Request) {
			w.Write([]byte("apiVersion: v1\n"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}, "read body: no complete answer within 300ms"},
		{"no answer", func(w http.ResponseWriter, r *http.Request) {
			<-r.Context().Done()
		}, "no complete answer within 300ms"},
		{"truncated", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Length", "1000")
			w.Write([]byte("apiVersion: v1\n"))
			w.(http.Flusher).Flush()
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
		}, "read body: the connection closed before the end of the body (truncated)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, srv := newServed(t, 200, urlList("a"))
			r := startURL(t, URLConfig{URL: srv.URL, Period: fast, Timeout: 300 * time.Millisecond})
			r.waitFor(t, "a", withPods("a-node1"))
			s.setHandler(tc.handler)
			u := r.waitFor(t, "the problem", hasProblem(tc.want, "a-node1"))
			if got := problemText(u); got != srv.URL+": "+tc.want {
				t.Errorf("problem = %q, want %q", got, srv.URL+": "+tc.want)
			}
			s.set(200, urlList("a"))
			r.waitFor(t, "recovery", withPods("a-node1"))
		})
	}
}

func TestURLRedirects(t *testing.T) {
	s, target := newServed(t, 200, urlList("a"))
	_ = s
	hops := func(n int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			var i int
			fmt.Sscanf(r.URL.Path, "/hop/%d", &i)
			if i >= n {
				http.Redirect(w, r, target.URL+"/pods", http.StatusFound)
				return
			}
			http.Redirect(w, r, fmt.Sprintf("/hop/%d", i+1), http.StatusFound)
		}
	}
	ok := httptest.NewServer(hops(MaxRedirects - 1))
	defer ok.Close()
	r := startURL(t, URLConfig{URL: ok.URL + "/hop/1", Period: time.Hour})
	if u := r.next(t); !withPods("a-node1")(u) {
		t.Errorf("%d redirects: pods %v, problems %q", MaxRedirects, podNames(u), problemText(u))
	}

	loop := httptest.NewServer(hops(1 << 30))
	defer loop.Close()
	r = startURL(t, URLConfig{URL: loop.URL + "/hop/1", Period: time.Hour})
	if u := r.next(t); !hasProblem(fmt.Sprintf("stopped after %d redirects", MaxRedirects))(u) {
		t.Errorf("a redirect loop: pods %v, problems %q", podNames(u), problemText(u))
	}

	down := httptest.NewTLSServer(http.RedirectHandler(target.URL+"/pods", http.StatusFound))
	defer down.Close()
	ca := writeCA(t, down)
	r = startURL(t, URLConfig{URL: down.URL, CAFile: ca, Period: time.Hour})
	if u := r.next(t); !hasProblem("redirect from https to " + target.URL + "/pods refused")(u) {
		t.Errorf("https to http: pods %v, problems %q", podNames(u), problemText(u))
	}
}

// writeCA writes the certificate of a TLS test server (self-signed: its own
// CA) to a PEM file and returns its path.
func writeCA(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(path, pemBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestURLTLS(t *testing.T) {
	s := &served{status: 200, body: urlList("a")}
	srv := httptest.NewTLSServer(s)
	defer srv.Close()

	// The system roots do not know the test CA.
	r := startURL(t, URLConfig{URL: srv.URL, Period: time.Hour})
	if u := r.next(t); !hasProblem("certificate signed by unknown authority")(u) {
		t.Errorf("without the CA: pods %v, problems %q", podNames(u), problemText(u))
	}

	// A CA bundle that appears later is read at the next poll.
	ca := filepath.Join(t.TempDir(), "ca.pem")
	r = startURL(t, URLConfig{URL: srv.URL, CAFile: ca, Period: fast})
	r.waitFor(t, "a missing bundle", hasProblem("read CA bundle "+ca))
	os.WriteFile(ca, []byte("not PEM"), 0o644)
	r.waitFor(t, "a bundle without certificates", hasProblem("no PEM certificate in it"))
	os.Rename(writeCA(t, srv), ca)
	r.waitFor(t, "a", withPods("a-node1"))

	// Plain HTTP to a TLS port, and TLS to a plain port.
	plain := strings.Replace(srv.URL, "https://", "http://", 1)
	r = startURL(t, URLConfig{URL: plain, Period: time.Hour})
	if u := r.next(t); !hasProblem("HTTP 400 Bad Request")(u) {
		t.Errorf("http to a TLS port: problems %q", problemText(u))
	}
	_, h := newServed(t, 200, urlList("a"))
	r = startURL(t, URLConfig{URL: strings.Replace(h.URL, "http://", "https://", 1), Period: time.Hour})
	if u := r.next(t); !hasProblem("server gave HTTP response to HTTPS client")(u) {
		t.Errorf("https to a plain port: problems %q", problemText(u))
	}
}

// A failure is logged once per cause, not once per poll; recovery once.
func TestURLLogsFailuresOnce(t *testing.T) {
	s, srv := newServed(t, 200, urlList("a"))
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast})
	r.collect(t)
	s.waitHits(t, 2)
	s.set(503, "")
	s.waitHits(t, s.hits.Load()+10)
	s.set(500, "")
	s.waitHits(t, s.hits.Load()+10)
	s.set(503, "") // a cause seen in this outage already
	s.waitHits(t, s.hits.Load()+10)
	s.set(200, urlList("a"))
	s.waitHits(t, s.hits.Load()+10)

	logs := r.logs.String()
	if n := strings.Count(logs, "cannot read pods from the manifest URL"); n != 2 {
		t.Errorf("%d failure lines for 2 causes over 30 polls, want 2:\n%s", n, logs)
	}
	if n := strings.Count(logs, "the manifest URL answers again"); n != 1 {
		t.Errorf("%d recovery lines, want 1:\n%s", n, logs)
	}
	// 30 failed polls, give or take the one in flight at each switch.
	failures := -1
	if m := regexp.MustCompile(`answers again.* failures=(\d+)`).FindStringSubmatch(logs); m != nil {
		failures, _ = strconv.Atoi(m[1])
	}
	if failures < 28 || failures > 32 {
		t.Errorf("the recovery line does not count about 30 failures:\n%s", logs)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var seq []string
	for _, st := range r.statuses {
		seq = append(seq, errText(st.Err))
	}
	want := []string{srv.URL + ": HTTP 503 Service Unavailable", srv.URL + ": HTTP 500 Internal Server Error",
		srv.URL + ": HTTP 503 Service Unavailable", ""}
	if !slices.Equal(seq, want) {
		t.Errorf("OnChange saw %q, want %q", seq, want)
	}
}

func TestFailureLogBacksOff(t *testing.T) {
	var f failureLog
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var logged []time.Duration
	// A failure every 20s for 5 hours.
	for d := time.Duration(0); d <= 5*time.Hour; d += 20 * time.Second {
		if log, _ := f.fail("down", t0.Add(d)); log {
			logged = append(logged, d)
		}
	}
	want := []time.Duration{0, time.Minute, 3 * time.Minute, 7 * time.Minute, 15 * time.Minute,
		31 * time.Minute, 63 * time.Minute, 123 * time.Minute, 183 * time.Minute, 243 * time.Minute}
	if !slices.Equal(logged, want) {
		t.Errorf("logged at %v, want %v", logged, want)
	}
	if f.count != 901 || !f.since.Equal(t0) {
		t.Errorf("count %d since %v", f.count, f.since)
	}
	if log, again := f.fail("other", t0.Add(5*time.Hour+time.Second)); !log || again {
		t.Errorf("a new cause: log %v again %v, want a first log", log, again)
	}
}

// The last good set survives a restart: a daemon started while the server is
// down runs it, with the failure as a problem.
func TestURLSavedSetAcrossRestart(t *testing.T) {
	save := filepath.Join(t.TempDir(), "url", "last-good")
	s, srv := newServed(t, 200, urlList("a", "b"))
	first := startURL(t, URLConfig{URL: srv.URL, Period: fast, SaveFile: save})
	good := first.waitFor(t, "a and b", withPods("a-node1", "b-node1"))
	first.stop() // Run saves right after the send, before it returns
	fi, err := os.Stat(save)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("save file mode %v, want 0600 (it may hold secrets)", fi.Mode().Perm())
	}

	// The server is down: the saved set is the first snapshot.
	s.set(503, "")
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast, SaveFile: save})
	u := r.next(t)
	if !hasProblem("HTTP 503", "a-node1", "b-node1")(u) {
		t.Fatalf("first update: pods %v, problems %q", podNames(u), problemText(u))
	}
	for i := range u.Pods {
		if u.Pods[i].UID != good.Pods[i].UID {
			t.Errorf("saved pod %s has UID %s, was %s", u.Pods[i].Name, u.Pods[i].UID, good.Pods[i].UID)
		}
	}

	// The same URL serving again with the same bytes: the problem goes, the
	// bytes are not parsed again.
	s.set(200, urlList("a", "b"))
	r.waitFor(t, "a and b without problem", withPods("a-node1", "b-node1"))
	if n := r.logs.count("msg=\"pods from the manifest URL\""); n != 0 {
		t.Errorf("the saved bytes were parsed again:\n%s", r.logs)
	}

	// Another URL does not get this URL's saved set.
	other := startURL(t, URLConfig{URL: "http://127.0.0.1:1/other", Period: time.Hour, SaveFile: save})
	if u := other.next(t); len(u.Pods) != 0 || len(u.Problems) != 1 {
		t.Errorf("another URL: pods %v, problems %q", podNames(u), problemText(u))
	}
	if !strings.Contains(other.logs.String(), "the saved set is of another manifest URL") {
		t.Errorf("not said why the saved set is not used:\n%s", other.logs)
	}
}

// The first snapshot waits for the first request, at most the timeout: a
// server that does not answer does not hold the agent longer.
func TestURLFirstSnapshotWithinTimeout(t *testing.T) {
	save := filepath.Join(t.TempDir(), "last-good")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close() // accepts (the kernel's backlog) and never answers
	url := "http://" + l.Addr().String() + "/x"
	if err := writeAtomic(save, []byte(saveHeader(url)+urlList("a"))); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	r := startURL(t, URLConfig{URL: url, Period: time.Hour, Timeout: 500 * time.Millisecond, SaveFile: save})
	u := r.next(t)
	took := time.Since(t0)
	if !hasProblem("no complete answer within 500ms", "a-node1")(u) {
		t.Fatalf("first update: pods %v, problems %q", podNames(u), problemText(u))
	}
	if took < 500*time.Millisecond || took > 3*time.Second {
		t.Errorf("first update after %s, want about the 500ms timeout", took)
	}
}

// A password in the URL is never shown, and a new one does not rename pods.
func TestURLPasswordRedacted(t *testing.T) {
	_, srv := newServed(t, 200, urlList("a"))
	withPass := strings.Replace(srv.URL, "http://", "http://me:sesame@", 1)
	r := startURL(t, URLConfig{URL: withPass, Period: time.Hour})
	u := r.next(t)
	if !withPods("a-node1")(u) {
		t.Fatalf("pods %v problems %q", podNames(u), problemText(u))
	}
	want := strings.Replace(srv.URL, "http://", "http://me:xxxxx@", 1)
	if u.Pods[0].Origin != want || strings.Contains(r.logs.String(), "sesame") {
		t.Errorf("origin %q; log:\n%s", u.Pods[0].Origin, r.logs)
	}
	r2 := startURL(t, URLConfig{URL: strings.Replace(withPass, "sesame", "other", 1), Period: time.Hour})
	if u2 := r2.next(t); u2.Pods[0].UID != u.Pods[0].UID {
		t.Errorf("a new password changed the UID")
	}
}

func TestURLRelist(t *testing.T) {
	s, srv := newServed(t, 200, urlList("a"))
	r := startURL(t, URLConfig{URL: srv.URL, Period: time.Hour})
	r.waitFor(t, "a", withPods("a-node1"))
	s.set(200, urlList("b"))
	r.src.Relist()
	r.waitFor(t, "b", withPods("b-node1"))
}

// Two items of one list with the same name: the first is used, the other is
// a problem, as the kubelet's filterInvalidPods ignores it with an event.
func TestURLDuplicateItems(t *testing.T) {
	list := strings.Replace(urlList("a", "b", "a"), `"image":"busybox"}]}}]}`, `"image":"other"}]}}]}`, 1)
	s, srv := newServed(t, 200, list)
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast})
	u := r.waitFor(t, "a and b", hasProblem("items[2]: pod default/a-node1 is items[0] too; the first is used", "a-node1", "b-node1"))
	if img := u.Pods[0].Spec.Containers[0].Image; img != "busybox" {
		t.Errorf("a runs image %s, want the first item's busybox", img)
	}
	s.set(200, urlList("a", "b"))
	r.waitFor(t, "no problem", withPods("a-node1", "b-node1"))
}

// Once sends what the first poll gives and returns: the saved set when the
// server fails.
func TestURLOnce(t *testing.T) {
	save := filepath.Join(t.TempDir(), "last-good")
	s, srv := newServed(t, 200, urlList("a"))
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	once := func() Update {
		t.Helper()
		out := make(chan Update, 1)
		src := NewURL(URLConfig{URL: srv.URL, NodeName: "node1", SaveFile: save}, logger)
		if err := src.Once(context.Background(), out); err != nil {
			t.Fatal(err)
		}
		return <-out
	}
	if u := once(); !withPods("a-node1")(u) {
		t.Fatalf("once: pods %v problems %q", podNames(u), problemText(u))
	}
	s.set(500, "")
	if u := once(); !hasProblem("HTTP 500", "a-node1")(u) {
		t.Fatalf("once with the server failing: pods %v problems %q", podNames(u), problemText(u))
	}
}

// RequestCounts counts every request and the failed ones, across the
// sources that share it (as those a reload makes do).
func TestURLRequestCounts(t *testing.T) {
	s, srv := newServed(t, 200, urlList("a"))
	logger := slog.New(slog.DiscardHandler)
	var counts RequestCounts
	once := func() {
		t.Helper()
		src := NewURL(URLConfig{URL: srv.URL, NodeName: "node1", Requests: &counts}, logger)
		if err := src.Once(context.Background(), make(chan Update, 1)); err != nil {
			t.Fatal(err)
		}
	}
	once()
	s.set(500, "")
	once()
	once()
	if total, failed := counts.Total.Load(), counts.Failed.Load(); total != 3 || failed != 2 {
		t.Errorf("%d requests, %d failed; want 3, 2 failed", total, failed)
	}
}

// The URL's pods are handed again, the same pods, while the good set stays:
// an update that only says the server failed copies no pod, and a pod
// handed is never changed after.
func TestURLKeptSetHandedAgainNotCopied(t *testing.T) {
	s, srv := newServed(t, 200, urlList("a", "b"))
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast})
	first := r.waitFor(t, "a and b", withPods("a-node1", "b-node1"))
	kept := []*v1.Pod{first.Pods[0].DeepCopy(), first.Pods[1].DeepCopy()}

	s.set(503, "busy")
	u := r.waitFor(t, "HTTP 503", hasProblem(srv.URL+": HTTP 503 Service Unavailable", "a-node1", "b-node1"))
	for i := range first.Pods {
		if u.Pods[i].Pod != first.Pods[i].Pod {
			t.Errorf("%s: handed anew (a copy) though the set did not change", first.Pods[i].Name)
		}
		if !reflect.DeepEqual(first.Pods[i].Pod, kept[i]) {
			t.Errorf("%s changed after it was handed", first.Pods[i].Name)
		}
	}
}
