package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/events"
)

func TestPrintEvents(t *testing.T) {
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) metav1.Time { return metav1.NewTime(now.Add(-ago)) }
	list := []v1.Event{
		{Type: v1.EventTypeNormal, Reason: "Starting", Message: "Starting staticpodd.", Count: 1,
			InvolvedObject: v1.ObjectReference{Kind: "Node", Name: "node1"}, FirstTimestamp: at(time.Hour), LastTimestamp: at(time.Hour)},
		{Type: v1.EventTypeWarning, Reason: "BackOff", Message: "Back-off restarting failed container web in pod web-node1_default(u1)", Count: 3,
			InvolvedObject: v1.ObjectReference{Kind: "Pod", Name: "web-node1", FieldPath: "spec.containers{web}"},
			FirstTimestamp: at(10 * time.Minute), LastTimestamp: at(5 * time.Second)},
	}
	var b bytes.Buffer
	if err := printEvents(&b, list, now); err != nil {
		t.Fatal(err)
	}
	want := `LAST SEEN          TYPE      REASON     OBJECT          CONTAINER   MESSAGE
60m                Normal    Starting   node/node1      <none>      Starting staticpodd.
5s (x3 over 10m)   Warning   BackOff    pod/web-node1   web         Back-off restarting failed container web in pod web-node1_default(u1)
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	printEvents(&b, nil, now)
	if b.String() != "No events.\n" {
		t.Errorf("no events: %q", b.String())
	}
}

// psRecorder holds the events serveDaemon's agent shows.
var psRecorder = events.New("node1", 0, slog.New(slog.DiscardHandler))

func (psAgent) Events() *events.Recorder { return psRecorder }

// staticpodd events, then events -w, against a daemon's socket.
func TestEventsCommand(t *testing.T) {
	dir := t.TempDir()
	serveDaemon(t, dir)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "httpd"}}}}
	psRecorder.Eventf(events.ContainerRef(pod, "httpd"), v1.EventTypeNormal, events.Started, "Container started")

	run := func(ctx context.Context, out io.Writer, args ...string) error {
		cmd := newEventsCmd(&globalOptions{RunDir: dir})
		cmd.SetOut(out)
		cmd.SetErr(io.Discard)
		cmd.SetArgs(args)
		return cmd.ExecuteContext(ctx)
	}
	var b bytes.Buffer
	if err := run(t.Context(), &b); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "   Normal   Started   pod/web-node1   httpd       Container started\n") {
		t.Errorf("events:\n%s", b.String())
	}

	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, pw, "-w"); pw.Close() }()
	lines := bufio.NewScanner(pr)
	next := func() string {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("events -w ended: %v", <-done)
		}
		return lines.Text()
	}
	if got := next(); !strings.HasPrefix(got, "LAST SEEN") {
		t.Errorf("first line %q, want the header", got)
	}
	if got := next(); !strings.Contains(got, "Started") {
		t.Errorf("second line %q, want the kept event", got)
	}
	psRecorder.Eventf(events.ContainerRef(pod, "httpd"), v1.EventTypeWarning, events.BackOff, "Back-off restarting failed container httpd in pod web-node1_default(u1)")
	if got := next(); !strings.Contains(got, "Warning") || !strings.Contains(got, "BackOff") {
		t.Errorf("third line %q, want the new event", got)
	}
	cancel()
	go io.Copy(io.Discard, pr)
	if err := <-done; err != nil {
		t.Errorf("events -w interrupted: %v, want a clean end", err)
	}
}
