package source

import (
	"fmt"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// TestURLWarningsBounded: the server decides how many unknown fields its
// body has, and may change the body at every poll. What one body costs the
// daemon's log is a few lines, whatever their number.
func TestURLWarningsBounded(t *testing.T) {
	var b strings.Builder
	b.WriteString(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"},"spec":{"containers":[{"name":"c","image":"busybox"}]}`)
	for i := range 5000 {
		fmt.Fprintf(&b, `,"unknown%d":1`, i)
	}
	b.WriteString("}")
	s, srv := newServed(t, 200, b.String())
	r := startURL(t, URLConfig{URL: srv.URL, Period: fast})
	r.collect(t)
	s.waitHits(t, 2)
	logs := r.logs.String()
	if n := strings.Count(logs, "unknown field, ignored"); n == 0 || n > manifest.MaxWarnings {
		t.Errorf("%d warning lines for a body with 5000 unknown fields, want 1 to %d", n, manifest.MaxWarnings)
	}
	if !strings.Contains(logs, "4981 more warnings not shown") {
		t.Errorf("the log does not say how many warnings it left out:\n%.2000s", logs)
	}
}
