package server

import (
	"errors"
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
		{Name: "other"},
	}}
	for name, h := range map[string]*httptest.Server{
		"read-only port": httptest.NewServer(ReadOnly(a, logger())),
		"CLI socket":     httptest.NewServer(CLI(a, logger())),
	} {
		defer h.Close()
		if code, _, body := get(t, h.Client(), h.URL+"/healthz"); code != 200 || string(body) != "ok" {
			t.Errorf("%s: /healthz = %d %q, want 200 ok", name, code, body)
		}
		want := "[+]ping ok\n" +
			"[-]manifest-url failed since 2026-03-04T05:06:07Z: http://10.0.0.1/pods: HTTP 503 Service Unavailable\n" +
			"[+]other ok\n" +
			"healthz check passed\n"
		if code, ctype, body := get(t, h.Client(), h.URL+"/healthz?verbose"); code != 200 || string(body) != want || ctype != "text/plain; charset=utf-8" {
			t.Errorf("%s: /healthz?verbose = %d %s\n%s\nwant\n%s", name, code, ctype, body, want)
		}
	}

	// Without auxiliary parts.
	h := httptest.NewServer(ReadOnly(testAgent, logger()))
	defer h.Close()
	if _, _, body := get(t, h.Client(), h.URL+"/healthz?verbose=1"); string(body) != "[+]ping ok\nhealthz check passed\n" {
		t.Errorf("/healthz?verbose=1 = %q", body)
	}
}
