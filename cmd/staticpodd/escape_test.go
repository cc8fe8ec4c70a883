package main

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/prober"
	"github.com/staticpodd/staticpodd/agent/server"
)

// hostileText is what a container may put in a probe's output or an event's
// message: an OSC 52 sequence that writes the terminal's clipboard, one
// that clears the screen, a C1 CSI and a bell.
const hostileText = "ok\x1b]52;c;ZWNobyBwd25lZA==\x07 \x1b[2J\u009b31m\x07done"

// TestTerminalControlsEscaped: events, failing probes and manifest
// problems, whose text containers and servers decide, reach the operator's terminal with their control
// characters shown, not obeyed (what kubectl's printers.EscapeTerminal does
// for CVE-2021-25743).
func TestTerminalControlsEscaped(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	var b bytes.Buffer
	ev := v1.Event{Type: v1.EventTypeWarning, Reason: "Unhealthy", Message: "Readiness probe failed: " + hostileText, Count: 1,
		InvolvedObject: v1.ObjectReference{Kind: "Pod", Name: "web", FieldPath: "spec.containers{web}"},
		LastTimestamp:  metav1.NewTime(now)}
	if err := printEvents(&b, []v1.Event{ev}, now); err != nil {
		t.Fatal(err)
	}
	probes := []prober.Status{{Namespace: "default", Pod: "web", Container: "web", Probe: prober.Readiness,
		Result: "failure", Output: hostileText, At: now}}
	// A manifest URL's server decides the reason phrase a problem quotes.
	problems := []server.Problem{{Origin: "https://example.com/pods", Error: "fetch: 500 " + hostileText}}
	if err := printPods(&b, nil, problems, probes, nil, nil, true, now); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, c := range []string{"\x1b", "\x07", "\u009b"} {
		if strings.Contains(out, c) {
			t.Errorf("output holds control character %q:\n%q", c, out)
		}
	}
	if n := strings.Count(out, `ok\x1b]52;c;ZWNobyBwd25lZA==\x07 \x1b[2J\u009b31m\x07done`); n != 3 {
		t.Errorf("the text shows escaped %d times, want 3 (event, probe, problem):\n%s", n, out)
	}
}

// TestErrorControlsEscaped: an error may quote a registry's message or a
// manifest URL's server; staticpodd prints it with its lines, not its
// terminal controls.
func TestErrorControlsEscaped(t *testing.T) {
	var b bytes.Buffer
	printError(&b, errors.New("pull busybox: DENIED: "+hostileText+"\n\tsecond line"))
	out := b.String()
	want := "staticpodd: pull busybox: DENIED: " + `ok\x1b]52;c;ZWNobyBwd25lZA==\x07 \x1b[2J\u009b31m\x07done` + "\n\tsecond line\n"
	if out != want {
		t.Errorf("printed %q, want %q", out, want)
	}
}
