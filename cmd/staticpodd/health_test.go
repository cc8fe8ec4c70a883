package main

import (
	"errors"
	"strings"
	"testing"
)

// An auxiliary part's failure shows in healthz checks and STATUS=, and goes
// once it works again; only changes count as changes.
func TestAuxiliaryPartsInChecksAndStatus(t *testing.T) {
	x := &auxiliary{}
	port := x.add("read-only-port", "read-only port")
	x.add("image-import", "image import watcher")
	if got := x.trouble(); got != "" {
		t.Errorf("trouble with all parts fine = %q", got)
	}
	err := errors.New("listen tcp 127.0.0.1:10255: bind: address already in use")
	if !port.set(err) {
		t.Error("a first failure is not a change")
	}
	if port.set(errors.New(err.Error())) {
		t.Error("the same failure again is a change")
	}
	if got, want := x.trouble(), "read-only port: listen tcp 127.0.0.1:10255: bind: address already in use"; got != want {
		t.Errorf("trouble = %q, want %q", got, want)
	}
	checks := x.checks()
	if len(checks) != 2 || checks[0].Name != "read-only-port" || checks[0].Err == nil || checks[0].Since.IsZero() || checks[1].Err != nil {
		t.Errorf("checks = %+v", checks)
	}
	if !port.set(nil) || port.set(nil) {
		t.Error("recovery must be one change")
	}
	if got := x.trouble(); strings.Contains(got, "read-only") {
		t.Errorf("trouble after recovery = %q", got)
	}
}
