package hostile

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// urlServer serves the manifest URL's one fixed address with whatever
// behaviour the test sets, and records which behaviour each request got. The
// URL source asks again only after it has dealt with the last answer (the
// poll, the update and its status happen before the next period starts), so
// a request that begins after one that got behaviour g says the daemon is
// done with g.
type urlServer struct {
	*httptest.Server
	t *testing.T

	mu      sync.Mutex // guards the fields below
	handler http.HandlerFunc
	gen     int   // of handler
	got     []int // the gen each request got, in the order they began
}

func newURLServer(t *testing.T, h http.HandlerFunc) *urlServer {
	s := &urlServer{t: t, handler: h}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		h := s.handler
		s.got = append(s.got, s.gen)
		s.mu.Unlock()
		h(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *urlServer) URL() string { return s.Server.URL + "/pods" }

// set makes h the answer from now on and returns its generation.
func (s *urlServer) set(h http.HandlerFunc) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
	s.gen++
	return s.gen
}

// handled waits until the daemon has dealt with an answer of generation gen:
// a request began after the first one that got it.
func (s *urlServer) handled(gen int, timeout time.Duration) {
	s.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		s.mu.Lock()
		first := -1
		for i, g := range s.got {
			if g == gen {
				first = i
				break
			}
		}
		done := first >= 0 && len(s.got) > first+1
		s.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("the daemon has not finished with answer %d within %s", gen, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// body answers 200 with b; net/http sends a body of more than a few KiB
// chunked, without a Content-Length.
func body(b []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { w.Write(b) }
}

// forAtMost bounds what a hostile answer sends, so that the test's own server
// stops even when the daemon never hangs up.
const forAtMost = 30 * time.Second

// endless streams a manifest that never ends, as fast as it is read: a pod
// whose one env value goes on for ever.
func endless(w http.ResponseWriter, r *http.Request) {
	stop := time.Now().Add(forAtMost)
	if _, err := w.Write([]byte(pod("endless", "", "    env:\n    - {name: PAD, value: \""))); err != nil {
		return
	}
	chunk := bytes.Repeat([]byte("x"), 64<<10)
	for sent := 0; sent < 4<<30 && time.Now().Before(stop); sent += len(chunk) {
		if _, err := w.Write(chunk); err != nil {
			return
		}
	}
}

// trickle sends a good manifest a byte at a time, 5 bytes a second: the
// whole would take minutes (slow loris).
func trickle(w http.ResponseWriter, r *http.Request) {
	m := []byte(sleeper("trickle"))
	stop := time.Now().Add(forAtMost)
	w.Header().Set("Content-Length", strconv.Itoa(len(m)))
	w.WriteHeader(http.StatusOK)
	for _, b := range m {
		if time.Now().After(stop) || r.Context().Err() != nil {
			return
		}
		if _, err := w.Write([]byte{b}); err != nil {
			return
		}
		w.(http.Flusher).Flush()
		select {
		case <-time.After(200 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	}
}

// raw answers with head (status line and headers) and then body, written on
// the bare connection, which is closed after: an answer net/http would not
// send, such as one whose Content-Length is not its length.
func raw(head string, b []byte) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		buf.WriteString(head + "\r\n")
		buf.Write(b)
		buf.Flush()
	}
}

// gzipBomb is zeros, n of them once decompressed, in a few hundred KiB of
// gzip; the daemon's HTTP client asks for gzip and undoes it on the way.
func gzipBomb(n int) []byte {
	var b bytes.Buffer
	z, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	zeros := make([]byte, 1<<20)
	for range n >> 20 {
		z.Write(zeros)
	}
	z.Close()
	return b.Bytes()
}

// urlCase is one hostile answer of the manifest URL.
type urlCase struct {
	name    string
	handler func() http.HandlerFunc
	// problem is a regexp the URL's problem must match once the daemon has
	// the answer; "" for an answer whose pods run (runs names one).
	problem string
	runs    string
	warning string
	big     bool // a 50 MiB body or more, or one that never ends
}

// hostileURLAnswers is the corpus of hostile bytes, each served as the body of
// a 200 answer, and the answers that only a server can give: a body larger
// than it says, one that never ends, one that trickles, redirects that loop,
// statuses that are not 200, headers without end, a decompression bomb.
func hostileURLAnswers() []urlCase {
	var usable, cases []urlCase
	for _, cc := range hostileCorpus() {
		uc := urlCase{name: "corpus/" + cc.name, problem: cc.problem, runs: cc.runs, warning: cc.warning,
			big: strings.Contains(cc.name, "50MiB") || strings.Contains(cc.name, "100MiB")}
		mk := cc.body
		uc.handler = func() http.HandlerFunc { return body(mk()) }
		switch cc.name {
		case "empty/zero-bytes", "empty/whitespace":
			// Not an empty set: the last good one keeps running (an empty
			// PodList is the way to remove the URL's pods).
			uc.problem = `empty body; the last good set keeps running`
		case "kind/podlist-in-a-file":
			continue // from a URL an empty PodList is good: see the end of the test
		}
		if uc.runs != "" {
			usable = append(usable, uc)
			continue
		}
		cases = append(cases, uc)
	}
	const mib = 1 << 20
	good := []byte(sleeper("never"))
	// The answers only a server gives go first, the large ones first of all,
	// while the daemon is at its idle size.
	cases = append([]urlCase{
		{name: "url/50MiB-said-in-Content-Length", big: true, problem: `body of 52428800 bytes is larger than 10485760 bytes`,
			handler: func() http.HandlerFunc {
				b := noise(50*mib, 51)
				return func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Length", strconv.Itoa(len(b)))
					w.Write(b)
				}
			}},
		{name: "url/never-ending-body", big: true, problem: `body larger than 10485760 bytes; cut off there`,
			handler: func() http.HandlerFunc { return endless }},
		{name: "url/gzip-bomb-256MiB", big: true, problem: `body larger than 10485760 bytes; cut off there`,
			handler: func() http.HandlerFunc {
				b := gzipBomb(256 << 20)
				return func(w http.ResponseWriter, r *http.Request) {
					w.Header().Set("Content-Encoding", "gzip")
					w.Header().Set("Content-Length", strconv.Itoa(len(b)))
					w.Write(b)
				}
			}},
		{name: "url/500-with-a-50MiB-manifest", big: true, problem: `HTTP 500 Internal Server Error`,
			// A body of an answer that is not 200 is never read.
			handler: func() http.HandlerFunc {
				b := append(bytes.Clone(good), bytes.Repeat([]byte("#"), 50*mib)...)
				return func(w http.ResponseWriter, r *http.Request) {
					w.WriteHeader(http.StatusInternalServerError)
					w.Write(b)
				}
			}},
		{name: "url/slow-loris-body", problem: `read body: no complete answer within 10s`,
			handler: func() http.HandlerFunc { return trickle }},
		{name: "url/truncated-body", problem: `read body: the connection closed before the end of the body \(truncated\)`,
			handler: func() http.HandlerFunc {
				return raw(fmt.Sprintf("HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: application/yaml\r\n", len(good)+4096), good)
			}},
		{name: "url/content-length-too-short", problem: `metadata: Invalid value: "nam": must be an object`,
			// The client reads what Content-Length says and no more: the
			// rest of the manifest is never seen.
			handler: func() http.HandlerFunc {
				return raw("HTTP/1.1 200 OK\r\nContent-Length: 40\r\n", good)
			}},
		{name: "url/garbage-chunked-encoding", problem: `read body: .*(chunk|malformed)`,
			handler: func() http.HandlerFunc {
				return raw("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n", []byte("zz\r\nnot a chunk size\r\n"))
			}},
		{name: "url/redirect-loop", problem: `stopped after 10 redirects`,
			handler: func() http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/pods", http.StatusFound) }
			}},
		{name: "url/503", problem: `HTTP 503 Service Unavailable`,
			handler: func() http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					http.Error(w, "try later", http.StatusServiceUnavailable)
				}
			}},
		{name: "url/404", problem: `HTTP 404 Not Found`,
			handler: func() http.HandlerFunc { return func(w http.ResponseWriter, r *http.Request) { http.NotFound(w, r) } }},
		{name: "url/endless-headers", problem: `server response headers exceeded 65536 bytes`,
			handler: func() http.HandlerFunc {
				return func(w http.ResponseWriter, r *http.Request) {
					for i := range 64 {
						w.Header().Set(fmt.Sprintf("X-Pad-%d", i), strings.Repeat("p", 16<<10))
					}
					w.Write(good)
				}
			}},
		{name: "url/html-error-page", problem: `not a Kubernetes object: the document is a string`,
			handler: func() http.HandlerFunc {
				return body([]byte("<html><body><h1>502 Bad Gateway</h1></body></html>\n"))
			}},
	}, cases...)
	return append(cases, usable...)
}

// TestHostileURLAnswers serves every case of the hostile corpus as the body of
// the manifest URL, one at a time, and then the answers only a server gives,
// to a daemon that runs a good pod from a file and one that came from the URL
// before. The daemon must say, for each, what is wrong (its problem for the
// URL in /problems, which `staticpodd ps` shows, and in /healthz?verbose,
// changing from case to case), keep both pods running untouched, and keep its
// memory bounded (the figures are logged; make bench records them). The last
// answers are usable ones, which replace the URL's pod, and an empty PodList,
// which removes the URL's pods and none of the file's.
func TestHostileURLAnswers(t *testing.T) {
	t.Parallel()
	d := testdaemon.New(t)
	srv := newURLServer(t, body([]byte(sleeper("urlgood"))))
	cfg, err := os.OpenFile(d.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// A short period: each case costs two polls.
	fmt.Fprintf(cfg, "staticPodURL: %s\nhttpCheckFrequency: 200ms\n", srv.URL())
	cfg.Close()
	d.WriteManifest("good.yaml", sleeper("good"))
	d.Start()
	good := d.WaitRunning("good", 30*time.Second)
	urlGood := d.WaitRunning("urlgood", 30*time.Second)
	if src := urlGood.Annotations["kubernetes.io/config.source"]; src != "http" {
		t.Fatalf("urlgood has config.source %q, want http", src)
	}
	goodPID, urlGoodPID := initProc(t, d, good), initProc(t, d, urlGood)
	idle := rssKiB(t, d.PID(), "VmRSS")
	t.Logf("the daemon's RSS with the two good pods running: %d MiB", idle>>10)
	t.Cleanup(func() {
		// Before the daemon's cleanup: no answer that holds a connection.
		gen := srv.set(body([]byte("apiVersion: v1\nkind: PodList\nitems: []\n")))
		srv.CloseClientConnections()
		srv.handled(gen, 30*time.Second)
	})

	start := time.Now()
	cases := hostileURLAnswers()
	var checked, usable int
	lastText := ""
	for _, uc := range cases {
		if uc.runs != "" && usable == 0 {
			// Before the first usable answer replaces it: the URL's good
			// pod ran untouched through every hostile one, and ps shows the
			// last one's problem.
			untouched(t, d, "urlgood", urlGood, urlGoodPID)
			if out := d.CLI("ps"); !strings.Contains(out, "Manifest problems:\n  "+srv.URL()+": "+lastText) {
				t.Errorf("ps does not show the URL's problem %q:\n%s", lastText, out)
			}
		}
		h := uc.handler()
		resetPeakRSS(t, d.PID())
		before := rssKiB(t, d.PID(), "VmRSS")
		gen := srv.set(h)
		srv.handled(gen, 45*time.Second)
		peak := rssKiB(t, d.PID(), "VmHWM") - idle
		t.Logf("%-45s peak RSS %4d MiB above idle, %4d MiB above the RSS before it", uc.name, peak>>10, (peak+idle-before)>>10)
		if peak > 256<<10 {
			t.Errorf("%s: the daemon's peak RSS was %d MiB above idle, want under 256 MiB", uc.name, peak>>10)
		}
		if uc.runs != "" {
			usable++
			p := d.WaitRunning(uc.runs, 60*time.Second)
			if src := p.Annotations["kubernetes.io/config.source"]; src != "http" {
				t.Errorf("%s: pod %s has config.source %q, want http", uc.name, uc.runs, src)
			}
			if pr, ok := problemFor(getProblems(t, d), srv.URL()); ok {
				t.Errorf("%s: a usable answer left a problem: %q", uc.name, pr)
			}
			if uc.warning != "" && !regexp.MustCompile(uc.warning).MatchString(d.Output()) {
				t.Errorf("%s: no warning matching %q in the daemon's log", uc.name, uc.warning)
			}
			continue
		}
		re := regexp.MustCompile(uc.problem)
		var pr string
		d.Eventually(10*time.Second, "the URL's problem for "+uc.name, func() error {
			var ok bool
			if pr, ok = problemFor(getProblems(t, d), srv.URL()); !ok {
				return fmt.Errorf("no problem for %s", srv.URL())
			}
			if !re.MatchString(pr) {
				return fmt.Errorf("problem %q does not say %q", pr, uc.problem)
			}
			return nil
		})
		// /healthz?verbose says the same on its manifest-url line.
		hz := mustGet(t, d.Client(), d.URL("/healthz?verbose"))
		// One line, or the check's line and one indented line per error.
		line := regexp.MustCompile(`(?m)^\[-\]manifest-url failed since \S+:( .*|\n(    .*\n?)+)`).FindString(hz)
		if !strings.Contains(line, srv.URL()+": ") || !re.MatchString(line) {
			t.Errorf("%s: /healthz?verbose does not say %q:\n%s", uc.name, uc.problem, hz)
		}
		if pr != lastText {
			checked++
		}
		lastText = pr
		t.Logf("%-45s %.200s", "", pr)
	}
	t.Logf("%d answers (%d with a problem text of their own) in %s", len(cases), checked, time.Since(start).Round(time.Second))
	if n := len(cases); n < 50 {
		t.Errorf("only %d hostile answers", n)
	}

	// The corpus's empty PodList, refused in a file, is good from a URL: it
	// removes the URL's pods, and only them.
	var emptyList []byte
	for _, cc := range hostileCorpus() {
		if cc.name == "kind/podlist-in-a-file" {
			emptyList = cc.body()
		}
	}
	if !strings.Contains(string(emptyList), "kind: PodList") {
		t.Fatalf("the corpus has no empty PodList: %q", emptyList)
	}
	srv.handled(srv.set(body(emptyList)), 30*time.Second)
	d.Eventually(30*time.Second, "the URL's pods removed", func() error {
		for _, p := range d.Pods() {
			if p.Annotations["kubernetes.io/config.source"] == "http" {
				return fmt.Errorf("pod %s from the URL still there", p.Name)
			}
		}
		return nil
	})
	if pr, ok := problemFor(getProblems(t, d), srv.URL()); ok {
		t.Errorf("an empty PodList left a problem: %q", pr)
	}
	untouched(t, d, "good", good, goodPID)

	// No log line carries a raw escape sequence or a forged line.
	if out := d.Output(); strings.Contains(out, "\x1b") || regexp.MustCompile(`(?m)^level=ERROR msg=forged`).MatchString(out) {
		t.Errorf("the daemon's log carries a raw escape sequence or a forged line")
	}
	// The failure of one cause is logged once, not once per poll: the
	// answers were each polled at least twice.
	logged := regexp.MustCompile(`(?m)^.*cannot read pods from the manifest URL.*err="HTTP 503 Service Unavailable".*$`).FindAllString(d.Output(), -1)
	if len(logged) != 1 {
		t.Errorf("the 503 was logged %d times, want once:\n%s", len(logged), strings.Join(logged, "\n"))
	}
}

// proc is a process as its PID and start time: a PID used again after the
// process is gone has another start time.
type proc struct {
	pid   int
	start uint64
}

// initProc is the pod's first container's process.
func initProc(t *testing.T, d *testdaemon.Daemon, p *v1.Pod) proc {
	t.Helper()
	pid := containerInit(t, d, p)
	_, start, ok := procStat(pid)
	if !ok {
		t.Fatalf("pod %s: its container's process %d is gone", p.Name, pid)
	}
	return proc{pid, start}
}

// untouched fails the test unless the pod name still runs as p did: the same
// UID, no restart, the same container, its process the same one (PID and
// start time).
func untouched(t *testing.T, d *testdaemon.Daemon, name string, p *v1.Pod, was proc) {
	t.Helper()
	now := d.Pod(name)
	switch {
	case now == nil:
		t.Errorf("pod %s is gone", name)
	case now.UID != p.UID || now.DeletionTimestamp != nil || now.Status.ContainerStatuses[0].RestartCount != 0 ||
		now.Status.ContainerStatuses[0].ContainerID != p.Status.ContainerStatuses[0].ContainerID:
		t.Errorf("pod %s changed: %+v", name, now.Status)
	default:
		if is := initProc(t, d, now); is != was {
			t.Errorf("pod %s: its container's process is %+v, was %+v", name, is, was)
		}
	}
}
