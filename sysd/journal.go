package sysd

import (
	"context"
	"log/slog"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/journal"
)

// Logger returns a logger for level and above. When stderr is connected to the journal
// (systemd sets JOURNAL_STREAM) records go to journald natively, with attributes as
// journal fields (pod="x" becomes POD=x); otherwise it writes slog text to stderr.
func Logger(level slog.Level) *slog.Logger {
	text := slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level})
	if ok, err := journal.StderrIsJournalStream(); err != nil || !ok {
		return slog.New(text)
	}
	return slog.New(newJournalHandler(level, journal.Send, text))
}

// sendFunc has the signature of journal.Send.
type sendFunc func(message string, priority journal.Priority, vars map[string]string) error

// journalHandler is a slog.Handler that writes records to journald's native protocol.
// When sending fails it hands the record to fallback.
type journalHandler struct {
	level    slog.Leveler
	send     sendFunc
	fallback slog.Handler
	prefix   string  // upper-cased groups opened by WithGroup, joined with "_"
	fields   []field // attributes from WithAttrs, already named
}

type field struct{ name, value string }

func newJournalHandler(level slog.Leveler, send sendFunc, fallback slog.Handler) *journalHandler {
	return &journalHandler{level: level, send: send, fallback: fallback}
}

func (h *journalHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

func (h *journalHandler) Handle(ctx context.Context, r slog.Record) error {
	vars := make(map[string]string, len(h.fields)+r.NumAttrs()+3)
	for _, f := range h.fields {
		vars[f.name] = f.value
	}
	r.Attrs(func(a slog.Attr) bool {
		for _, f := range appendFields(nil, h.prefix, a) {
			vars[f.name] = f.value
		}
		return true
	})
	if r.PC != 0 {
		frame, _ := runtime.CallersFrames([]uintptr{r.PC}).Next()
		vars["CODE_FILE"] = frame.File
		vars["CODE_LINE"] = strconv.Itoa(frame.Line)
		vars["CODE_FUNC"] = frame.Function
	}
	msg := r.Message
	// A record whose attributes carry a message of their own (an event's)
	// shows both in `journalctl`'s one line; the attribute stays as SLOG_MESSAGE.
	if m := vars["SLOG_MESSAGE"]; m != "" {
		msg += ": " + m
	}
	msg += podContext(vars)
	if err := h.send(msg, priority(r.Level), vars); err != nil {
		return h.fallback.Handle(ctx, r)
	}
	return nil
}

func (h *journalHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	c := *h
	c.fields = append([]field(nil), h.fields...)
	for _, a := range attrs {
		c.fields = appendFields(c.fields, h.prefix, a)
	}
	c.fallback = h.fallback.WithAttrs(attrs)
	return &c
}

func (h *journalHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + fieldName(name) + "_"
	c.fallback = h.fallback.WithGroup(name)
	return &c
}

// appendFields names a and, for a group, each of its members, as journal fields.
func appendFields(fs []field, prefix string, a slog.Attr) []field {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += fieldName(a.Key) + "_"
		}
		for _, m := range v.Group() {
			fs = appendFields(fs, prefix, m)
		}
		return fs
	}
	if a.Key == "" {
		return fs
	}
	name := prefix + fieldName(a.Key)
	if reserved[name] {
		name = "SLOG_" + name
	}
	fs = append(fs, field{name: truncate(name), value: valueString(v)})
	// The agent names a pod namespace/name; the journal also gets both halves,
	// so that `journalctl NAMESPACE=kube-system` and `POD_NAME=etcd-node1` work.
	if name == "POD" {
		if ns, pod, ok := strings.Cut(valueString(v), "/"); ok && ns != "" && pod != "" {
			fs = append(fs, field{name: "NAMESPACE", value: ns}, field{name: "POD_NAME", value: pod})
		}
	}
	return fs
}

// podContext is what a pod's record adds to its MESSAGE: ` pod="ns/name"
// container="c"`, as the kubelet's lines read, since journalctl's default
// output shows MESSAGE and no field. Quoted, so that a value's spaces or
// control characters cannot pass for more of the line.
func podContext(vars map[string]string) string {
	var b strings.Builder
	for _, f := range [...]struct{ field, key string }{{"POD", "pod"}, {"CONTAINER", "container"}} {
		if v := vars[f.field]; v != "" {
			b.WriteString(" " + f.key + "=" + strconv.Quote(v))
		}
	}
	return b.String()
}

// reserved names are set by the handler itself; an attribute must not override them.
var reserved = map[string]bool{
	"MESSAGE": true, "PRIORITY": true, "CODE_FILE": true, "CODE_LINE": true, "CODE_FUNC": true,
}

// fieldName turns an attribute key into a journal field name: upper case, letters,
// digits and underscores, not starting with an underscore or a digit.
func fieldName(key string) string {
	var b strings.Builder
	for _, c := range strings.ToUpper(key) {
		if ('A' <= c && c <= 'Z') || ('0' <= c && c <= '9') {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	name := strings.TrimLeft(b.String(), "_")
	if name == "" || ('0' <= name[0] && name[0] <= '9') {
		name = "F" + name
	}
	return name
}

// truncate keeps name within journald's 64-character limit on field names.
func truncate(name string) string {
	const maxLen = 64
	if len(name) > maxLen {
		return name[:maxLen]
	}
	return name
}

func valueString(v slog.Value) string {
	if v.Kind() == slog.KindTime {
		return v.Time().Format(time.RFC3339Nano)
	}
	return v.String()
}

func priority(l slog.Level) journal.Priority {
	switch {
	case l >= slog.LevelError:
		return journal.PriErr
	case l >= slog.LevelWarn:
		return journal.PriWarning
	case l >= slog.LevelInfo:
		return journal.PriInfo
	default:
		return journal.PriDebug
	}
}
