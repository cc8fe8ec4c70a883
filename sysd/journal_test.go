package sysd

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/coreos/go-systemd/v22/journal"
)

// entry is what the handler handed to journal.Send.
type entry struct {
	msg  string
	pri  journal.Priority
	vars map[string]string
}

type sink struct {
	entries []entry
	err     error // returned by send
}

func (s *sink) send(msg string, pri journal.Priority, vars map[string]string) error {
	s.entries = append(s.entries, entry{msg, pri, maps.Clone(vars)})
	return s.err
}

func newTestLogger(s *sink, fallback *bytes.Buffer) *slog.Logger {
	text := slog.NewTextHandler(fallback, &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(newJournalHandler(slog.LevelDebug, s.send, text))
}

func TestJournalFields(t *testing.T) {
	var s sink
	var fallback bytes.Buffer
	log := newTestLogger(&s, &fallback).With("pod", "etcd-node1").WithGroup("ctr")
	log.Info("container started",
		"name", "etcd",
		"restart-count", 2,
		slog.Group("limits", "memory", "1Gi"),
		"err", errors.New("boom"),
		"2fa", "y",
		slog.Group("", "inline", "yes"),
		slog.Group("empty"))

	if len(s.entries) != 1 {
		t.Fatalf("sent %d entries, want 1", len(s.entries))
	}
	e := s.entries[0]
	if want := `container started pod="etcd-node1"`; e.msg != want || e.pri != journal.PriInfo {
		t.Errorf("MESSAGE=%q PRIORITY=%d, want %q %d", e.msg, e.pri, want, journal.PriInfo)
	}
	if !strings.HasSuffix(e.vars["CODE_FILE"], "journal_test.go") ||
		!strings.HasSuffix(e.vars["CODE_FUNC"], ".TestJournalFields") || e.vars["CODE_LINE"] == "" {
		t.Errorf("CODE_FILE=%q CODE_FUNC=%q CODE_LINE=%q, want this test", e.vars["CODE_FILE"], e.vars["CODE_FUNC"], e.vars["CODE_LINE"])
	}
	delete(e.vars, "CODE_FILE")
	delete(e.vars, "CODE_FUNC")
	delete(e.vars, "CODE_LINE")
	want := map[string]string{
		"POD":               "etcd-node1",
		"CTR_NAME":          "etcd",
		"CTR_RESTART_COUNT": "2",
		"CTR_LIMITS_MEMORY": "1Gi",
		"CTR_ERR":           "boom",
		"CTR_F2FA":          "y",
		"CTR_INLINE":        "yes",
	}
	if !maps.Equal(e.vars, want) {
		t.Errorf("fields:\n got %v\nwant %v", e.vars, want)
	}
	if fallback.Len() != 0 {
		t.Errorf("fallback written although send succeeded: %s", fallback.String())
	}
}

func TestJournalReservedFieldsNotOverridden(t *testing.T) {
	var s sink
	newTestLogger(&s, new(bytes.Buffer)).Warn("real message", "message", "attr", "Priority", 1, "_private", "p")
	e := s.entries[0]
	// The record's message leads; the attribute only follows it.
	if e.msg != "real message: attr" || e.pri != journal.PriWarning {
		t.Errorf("MESSAGE=%q PRIORITY=%d, want the record's", e.msg, e.pri)
	}
	for name, want := range map[string]string{"SLOG_MESSAGE": "attr", "SLOG_PRIORITY": "1", "PRIVATE": "p"} {
		if got := e.vars[name]; got != want {
			t.Errorf("%s=%q, want %q (all: %v)", name, got, want, e.vars)
		}
	}
	for name := range e.vars {
		if name == "MESSAGE" || name == "PRIORITY" || strings.HasPrefix(name, "_") {
			t.Errorf("attribute set journal field %s", name)
		}
	}
}

func TestJournalWithAttrsDoesNotLeak(t *testing.T) {
	var s sink
	base := newTestLogger(&s, new(bytes.Buffer)).With("a", 1)
	_ = base.With("b", 2).WithGroup("g")
	base.Info("m")
	if got := s.entries[0].vars; got["A"] != "1" || got["B"] != "" || got["G_A"] != "" {
		t.Errorf("fields = %v, want only A=1", got)
	}
}

func TestJournalPriority(t *testing.T) {
	for _, tc := range []struct {
		level slog.Level
		want  journal.Priority
	}{
		{slog.LevelDebug, journal.PriDebug},
		{slog.LevelInfo, journal.PriInfo},
		{slog.LevelWarn, journal.PriWarning},
		{slog.LevelError, journal.PriErr},
		{slog.LevelError + 4, journal.PriErr},
	} {
		var s sink
		newTestLogger(&s, new(bytes.Buffer)).Log(t.Context(), tc.level, "m")
		if len(s.entries) != 1 || s.entries[0].pri != tc.want {
			t.Errorf("level %v: sent %v, want one entry with priority %d", tc.level, s.entries, tc.want)
		}
	}
}

func TestJournalLevelFilter(t *testing.T) {
	var s sink
	log := slog.New(newJournalHandler(slog.LevelWarn, s.send, slog.DiscardHandler))
	log.Info("dropped")
	log.Warn("kept")
	if len(s.entries) != 1 || s.entries[0].msg != "kept" {
		t.Errorf("sent %v, want only the warning", s.entries)
	}
}

func TestJournalFallsBackToTextOnSendError(t *testing.T) {
	s := sink{err: errors.New("journald gone")}
	var fallback bytes.Buffer
	newTestLogger(&s, &fallback).With("pod", "web").WithGroup("ctr").Error("exited", "code", 137)
	out := fallback.String()
	for _, want := range []string{"level=ERROR", "msg=exited", "pod=web", "ctr.code=137"} {
		if !strings.Contains(out, want) {
			t.Errorf("fallback output %q lacks %q", out, want)
		}
	}
}

func TestLoggerTextWhenNotJournal(t *testing.T) {
	t.Setenv("JOURNAL_STREAM", "")
	if h := Logger(slog.LevelInfo).Handler(); !isText(h) {
		t.Errorf("handler = %T, want *slog.TextHandler", h)
	}
}

func TestLoggerJournalWhenStderrIsJournal(t *testing.T) {
	var st syscall.Stat_t
	if err := syscall.Fstat(int(os.Stderr.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	t.Setenv("JOURNAL_STREAM", fmt.Sprintf("%d:%d", st.Dev, st.Ino))
	log := Logger(slog.LevelWarn)
	if _, ok := log.Handler().(*journalHandler); !ok {
		t.Fatalf("handler = %T, want the journal handler", log.Handler())
	}
	if log.Enabled(t.Context(), slog.LevelInfo) || !log.Enabled(t.Context(), slog.LevelWarn) {
		t.Error("journal handler ignores the level")
	}
}

func isText(h slog.Handler) bool {
	_, ok := h.(*slog.TextHandler)
	return ok
}

// A pod named namespace/name also gives NAMESPACE= and POD_NAME=.
func TestJournalPodNamespace(t *testing.T) {
	var s sink
	var fallback bytes.Buffer
	newTestLogger(&s, &fallback).Info("started", "pod", "kube-system/etcd-node1", "container", "etcd")
	if len(s.entries) != 1 {
		t.Fatalf("sent %d messages, want 1", len(s.entries))
	}
	vars := s.entries[0].vars
	for k, want := range map[string]string{
		"POD": "kube-system/etcd-node1", "NAMESPACE": "kube-system", "POD_NAME": "etcd-node1", "CONTAINER": "etcd",
	} {
		if vars[k] != want {
			t.Errorf("%s=%q, want %q (all: %v)", k, vars[k], want, vars)
		}
	}
	newTestLogger(&s, &fallback).Info("odd", "pod", "no-slash")
	if _, ok := s.entries[1].vars["NAMESPACE"]; ok {
		t.Errorf("a pod without a namespace got NAMESPACE=: %v", s.entries[1].vars)
	}
}

// An event's own message shows in the journal's MESSAGE beside the record's.
func TestJournalMessageAttribute(t *testing.T) {
	var s sink
	var fallback bytes.Buffer
	newTestLogger(&s, &fallback).Warn("event", "reason", "BackOff", "message", "Back-off restarting failed container")
	if len(s.entries) != 1 {
		t.Fatalf("sent %d messages, want 1", len(s.entries))
	}
	if got, want := s.entries[0].msg, "event: Back-off restarting failed container"; got != want {
		t.Errorf("MESSAGE=%q, want %q", got, want)
	}
	if got := s.entries[0].vars["SLOG_MESSAGE"]; got != "Back-off restarting failed container" {
		t.Errorf("SLOG_MESSAGE=%q", got)
	}
}

// TestJournalMessageNamesPod: journalctl's default output shows MESSAGE only,
// so a pod's record names its pod and container there, as the kubelet's lines
// read; the fields stay.
func TestJournalMessageNamesPod(t *testing.T) {
	var s sink
	log := newTestLogger(&s, new(bytes.Buffer))
	log.With("pod", "kube-system/etcd-node1").Warn("probe failed", "container", "etcd", "probe", "liveness")
	log.Info("event", "type", "Normal", "reason", "Created", "pod", "default/web-node1", "container", "httpd", "message", "Created container httpd")
	log.With("pod", "default/web-node1").Info("pod synced")
	log.Info("container exited", "container", "c\n\"x")
	log.Info("no pod here", "file", "/etc/kubernetes/manifests/web.yaml")
	want := []string{
		`probe failed pod="kube-system/etcd-node1" container="etcd"`,
		`event: Created container httpd pod="default/web-node1" container="httpd"`,
		`pod synced pod="default/web-node1"`,
		`container exited container="c\n\"x"`,
		`no pod here`,
	}
	if len(s.entries) != len(want) {
		t.Fatalf("sent %d entries, want %d", len(s.entries), len(want))
	}
	for i, e := range s.entries {
		if e.msg != want[i] {
			t.Errorf("MESSAGE=%q, want %q", e.msg, want[i])
		}
	}
	if v := s.entries[0].vars; v["POD"] != "kube-system/etcd-node1" || v["CONTAINER"] != "etcd" || v["PROBE"] != "liveness" {
		t.Errorf("fields %v, want POD, CONTAINER and PROBE kept", v)
	}
}

// TestJournalDocumentedQueries: every `journalctl -u staticpodd FIELD=value...`
// packaging/README.md shows matches the lines of the pod and container it
// names (journalctl ANDs the fields of a query).
func TestJournalDocumentedQueries(t *testing.T) {
	var s sink
	newTestLogger(&s, new(bytes.Buffer)).With("pod", "kube-system/etcd-node1").Warn("probe failed", "container", "etcd")
	checkDocumentedQueries(t, s.entries[0].vars)
}

// checkDocumentedQueries checks that each query of packaging/README.md
// matches a record with fields vars.
func checkDocumentedQueries(t *testing.T, vars map[string]string) {
	t.Helper()
	doc, err := os.ReadFile("../packaging/README.md")
	if err != nil {
		t.Fatal(err)
	}
	queries := 0
	for _, line := range strings.Split(string(doc), "\n") {
		args, ok := strings.CutPrefix(strings.TrimSpace(line), "journalctl -u staticpodd ")
		if !ok {
			continue
		}
		queries++
		for _, a := range strings.Fields(args) {
			name, value, ok := strings.Cut(a, "=")
			if !ok {
				t.Errorf("query %q: %q is no FIELD=value", line, a)
				continue
			}
			if vars[name] != value {
				t.Errorf("query %q: %s=%q matches nothing: the record has %s=%q", strings.TrimSpace(line), name, value, name, vars[name])
			}
		}
	}
	if queries < 3 {
		t.Errorf("found %d journalctl queries in packaging/README.md, want the 3 it documents", queries)
	}
}
