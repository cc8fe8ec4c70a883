package server

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"
	"time"
)

type checkedAgent struct {
	fakeAgent
	checks []Check
}

func (c checkedAgent) Checks() []Check { return c.checks }

// /healthz stays the kubelet's plain "ok" while an auxiliary part fails;
// ?verbose says which and why.
func TestHealthzVerbose(t *testing.T) {
	since := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	a := checkedAgent{testAgent, []Check{
		{Name: "manifest-url", Err: errors.New("http://10.0.0.1/pods: HTTP 503 Service\nUnavailable"), Since: since},
		// The mirror's parts failing at once, an API server down: each
		// error on a line of its own, indented, so that none passes for a
		// check of its own.
		{Name: "mirror", Err: errors.Join(errors.New("lease: dial tcp 10.0.0.2:6443: connect: connection refused"),
			errors.New("node: dial tcp 10.0.0.2:6443: connect: connection refused\r\n[+]forged ok")), Since: since},
		{Name: "other"},
	}}
	for name, h := range map[string]*httptest.Server{
		"read-only port": httptest.NewServer(ReadOnly(a, nil, logger())),
		"CLI socket":     httptest.NewServer(CLI(a, logger())),
	} {
		defer h.Close()
		if code, _, body := get(t, h.Client(), h.URL+"/healthz"); code != 200 || string(body) != "ok" {
			t.Errorf("%s: /healthz = %d %q, want 200 ok", name, code, body)
		}
		want := "[+]ping ok\n" +
			"[-]manifest-url failed since 2026-03-04T05:06:07Z: http://10.0.0.1/pods: HTTP 503 Service Unavailable\n" +
			"[-]mirror failed since 2026-03-04T05:06:07Z:\n" +
			"    lease: dial tcp 10.0.0.2:6443: connect: connection refused\n" +
			"    node: dial tcp 10.0.0.2:6443: connect: connection refused [+]forged ok\n" +
			"[+]other ok\n" +
			"healthz check passed\n"
		if code, ctype, body := get(t, h.Client(), h.URL+"/healthz?verbose"); code != 200 || string(body) != want || ctype != "text/plain; charset=utf-8" {
			t.Errorf("%s: /healthz?verbose = %d %s\n%s\nwant\n%s", name, code, ctype, body, want)
		}
	}

	// Without auxiliary parts.
	h := httptest.NewServer(ReadOnly(testAgent, nil, logger()))
	defer h.Close()
	if _, _, body := get(t, h.Client(), h.URL+"/healthz?verbose=1"); string(body) != "[+]ping ok\nhealthz check passed\n" {
		t.Errorf("/healthz?verbose=1 = %q", body)
	}
}

type loopAgent struct {
	checkedAgent
	loopErr error
}

func (l loopAgent) SyncLoopHealthCheck() error { return l.loopErr }

// A wedged reconcile loop fails /healthz as the kubelet's syncloop check
// does; each check has its own /healthz/{name}.
func TestHealthzSyncLoop(t *testing.T) {
	a := loopAgent{checkedAgent{testAgent, []Check{{Name: "manifest-url", Err: errors.New("HTTP 503")}, {Name: "node-api"}}}, nil}
	h := httptest.NewServer(ReadOnly(a, nil, logger()))
	defer h.Close()
	for path, want := range map[string]string{
		"/healthz": "200 ok", "/healthz/ping": "200 ok", "/healthz/syncloop": "200 ok", "/healthz/node-api": "200 ok",
		"/healthz/manifest-url": "500 internal server error: HTTP 503\n", "/healthz/nothing": "404 404 page not found\n",
		"/healthz?verbose": "200 [+]ping ok\n[+]syncloop ok\n[-]manifest-url failed since 0001-01-01T00:00:00Z: HTTP 503\n[+]node-api ok\nhealthz check passed\n",
	} {
		if code, _, body := get(t, h.Client(), h.URL+path); fmt.Sprintf("%d %s", code, body) != want {
			t.Errorf("%s = %d %q, want %q", path, code, body, want)
		}
	}
	a.loopErr = errors.New("sync loop took longer than expected: last iteration began 6m0s ago")
	h2 := httptest.NewServer(ReadOnly(a, nil, logger()))
	defer h2.Close()
	for path, want := range map[string]string{
		"/healthz":          "500 [+]ping ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n",
		"/healthz?verbose":  "500 [+]ping ok\n[-]syncloop failed: sync loop took longer than expected: last iteration began 6m0s ago\nhealthz check failed\n",
		"/healthz/syncloop": "500 internal server error: sync loop took longer than expected: last iteration began 6m0s ago\n",
	} {
		if code, _, body := get(t, h2.Client(), h2.URL+path); fmt.Sprintf("%d %s", code, body) != want {
			t.Errorf("wedged: %s = %d %q, want %q", path, code, body, want)
		}
	}
}

// The healthz port answers as the kubelet's: k8s.io/apiserver's healthz
// handler with the ping check alone, to any method, excludes included.
func TestHealthzPort(t *testing.T) {
	h := httptest.NewServer(HealthzPort())
	defer h.Close()
	for path, want := range map[string]string{
		"/healthz":                             "200 ok",
		"/healthz/ping":                        "200 ok",
		"/healthz?verbose":                     "200 [+]ping ok\nhealthz check passed\n",
		"/healthz?verbose&exclude=ping":        "200 [+]ping excluded: ok\nhealthz check passed\n",
		"/healthz?verbose&exclude=b&exclude=a": "200 [+]ping ok\nwarn: some health checks cannot be excluded: no matches for \"a\",\"b\"\nhealthz check passed\n",
		"/healthz?exclude=nothing":             "200 ok",
		// The node's other checks are the read-only port's and node API's.
		"/healthz/syncloop": "404 404 page not found\n",
		"/pods":             "404 404 page not found\n",
	} {
		if code, _, body := get(t, h.Client(), h.URL+path); fmt.Sprintf("%d %s", code, body) != want {
			t.Errorf("%s = %d %q, want %q", path, code, body, want)
		}
	}
	resp, err := h.Client().Post(h.URL+"/healthz", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Errorf("POST /healthz = %d %s, want 200 text/plain", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
}
