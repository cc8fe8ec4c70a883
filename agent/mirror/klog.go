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

// Handle drops r unless debug is on: logr hands errors (client-go's "Unable
// to write event" with the whole Event printed, every retry of an outage)
// to its sink without asking Enabled first.
func (d debugHandler) Handle(ctx context.Context, r slog.Record) error {
	if !d.h.Enabled(ctx, slog.LevelDebug) {
		return nil
	}
	r.Level = slog.LevelDebug
	return d.h.Handle(ctx, r)
}

func (d debugHandler) WithAttrs(as []slog.Attr) slog.Handler { return debugHandler{d.h.WithAttrs(as)} }
func (d debugHandler) WithGroup(name string) slog.Handler    { return debugHandler{d.h.WithGroup(name)} }
