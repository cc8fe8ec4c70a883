package mirror

import (
	"context"
	"log/slog"
	"sync"

	"k8s.io/klog/v2"
)

var klogOnce sync.Once

// quietKlog sends what client-go logs through klog (an event it cannot post,
// a watch it restarts, each retry of them) to logger at debug level: the
// mirror client reports each failing part once, by its health, and a long
// outage must not flood the journal.
func quietKlog(logger *slog.Logger) {
	klogOnce.Do(func() {
		klog.SetSlogLogger(slog.New(debugHandler{logger.Handler()}))
	})
}

// debugHandler writes every record at debug level.
type debugHandler struct{ h slog.Handler }

func (d debugHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return d.h.Enabled(ctx, slog.LevelDebug)
}

func (d debugHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d debugHandler) WithAttrs(as []slog.Attr) slog.Handler { return debugHandler{d.h.WithAttrs(as)} }
func (d debugHandler) WithGroup(name string) slog.Handler    { return debugHandler{d.h.WithGroup(name)} }
