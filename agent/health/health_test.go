package health

import (
	"errors"
	"strings"
	"testing"
)

// An auxiliary part's failure shows in healthz checks and STATUS=, and goes
// once it works again; only changes count as changes.
func TestAuxiliaryPartsInChecksAndStatus(t *testing.T) {
	x := &Parts{}
	port := x.Add("read-only-port", "read-only port")
	x.Add("image-import", "image import watcher")
	if got := x.Trouble(); got != "" {
		t.Errorf("trouble with all parts fine = %q", got)
	}
	err := errors.New("listen tcp 127.0.0.1:10255: bind: address already in use")
	if !port.Set(err) {
		t.Error("a first failure is not a change")
	}
	if port.Set(errors.New(err.Error())) {
		t.Error("the same failure again is a change")
	}
	if got, want := x.Trouble(), "read-only port: listen tcp 127.0.0.1:10255: bind: address already in use"; got != want {
		t.Errorf("trouble = %q, want %q", got, want)
	}
	checks := x.Checks()
	if len(checks) != 2 || checks[0].Name != "read-only-port" || checks[0].Err == nil || checks[0].Since.IsZero() || checks[1].Err != nil {
		t.Errorf("checks = %+v", checks)
	}
	if !port.Set(nil) || port.Set(nil) {
		t.Error("recovery must be one change")
	}
	if got := x.Trouble(); strings.Contains(got, "read-only") {
		t.Errorf("trouble after recovery = %q", got)
	}
}
