package monitor

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// TestStartFailureBounded: the error of a container that could not start is
// libcontainer's, which quotes what the spec holds; the exit record and the
// report keep MaxMessage of it, cut on a rune boundary, so that the report
// still fits what the daemon reads of it.
func TestStartFailureBounded(t *testing.T) {
	huge := errors.New(`exec: "/` + strings.Repeat("é", 1<<20) + `": file name too long`)
	if msg := startFailure(huge).Message; len(msg) > MaxMessage || !utf8.ValidString(msg) || !strings.HasPrefix(msg, `exec: "/éé`) {
		t.Errorf("exit message of %d bytes (valid UTF-8: %v), want at most %d", len(msg), utf8.ValidString(msg), MaxMessage)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	m := &monitorProc{report: w}
	go m.sendReport(Report{Error: huge.Error()})
	data, err := io.ReadAll(io.LimitReader(r, 1<<16)) // as the daemon reads it
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatalf("the report of %d bytes does not decode: %v", len(data), err)
	}
	if len(rep.Error) > MaxMessage || !strings.HasPrefix(rep.Error, `exec: "/éé`) {
		t.Errorf("reported error of %d bytes, want at most %d", len(rep.Error), MaxMessage)
	}
}
