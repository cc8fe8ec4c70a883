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
	if e.msg != "container started" || e.pri != journal.PriInfo {
		t.Errorf("MESSAGE=%q PRIORITY=%d, want %q %d", e.msg, e.pri, "container started", journal.PriInfo)
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
