package image

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"
)

// TransferOption is an option of an import or an export.
type TransferOption func(*transferOptions)

type transferOptions struct {
	progress func(Progress)
	period   time.Duration
}

// WithProgress has fn told how far an import or export got: at its start,
// as bytes are read or written (at most every period; 0: at every read or
// write, for an fn that only keeps the figures), and when a layer or step
// is done. Layers are those the store did not have
// (import) or the archive's (export); Bytes is 0 where the total is not
// known before the end (an import's unpacked bytes).
func WithProgress(fn func(Progress), period time.Duration) TransferOption {
	return func(o *transferOptions) {
		o.progress = fn
		o.period = period
	}
}

func transferOpts(opts []TransferOption) transferOptions {
	var o transferOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o
}

// meter counts a transfer's Progress and reports it through fn. A nil
// meter (no fn) counts nothing.
type meter struct {
	fn     func(Progress)
	period time.Duration
	mu     sync.Mutex
	p      Progress
	last   time.Time
}

func newMeter(o transferOptions) *meter {
	if o.progress == nil {
		return nil
	}
	return &meter{fn: o.progress, period: o.period}
}

// phase starts a step of the transfer whose bytes are counted apart, bytes
// of them (0: not known).
func (m *meter) phase(name string, bytes int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	ended := m.p.Phase != ""
	m.mu.Unlock()
	if ended {
		m.report(true) // where the phase before ended
	}
	m.mu.Lock()
	m.p.Phase, m.p.Bytes, m.p.BytesDone = name, bytes, 0
	m.mu.Unlock()
	m.report(true)
}

// total sets what the transfer will do, and reports it.
func (m *meter) total(layers int, bytes int64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.p.Layers, m.p.Bytes = layers, bytes
	m.mu.Unlock()
	m.report(true)
}

func (m *meter) add(n int64) {
	if m == nil || n <= 0 {
		return
	}
	m.mu.Lock()
	m.p.BytesDone += n
	m.mu.Unlock()
	m.report(false)
}

func (m *meter) layerDone() {
	if m == nil {
		return
	}
	m.mu.Lock()
	m.p.LayersDone++
	m.mu.Unlock()
	m.report(true)
}

// report calls fn with the counts, unless force is false and the last call
// is less than a period ago. fn is called under the meter's lock, so calls
// never overlap or come out of order.
func (m *meter) report(force bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !force && time.Since(m.last) < m.period {
		return
	}
	m.last = time.Now()
	p := m.p
	if p.Bytes > 0 {
		p.BytesDone = min(p.BytesDone, p.Bytes)
	}
	m.fn(p)
}

// meterReader counts what is read through it.
type meterReader struct {
	r io.Reader
	m *meter
}

func (r meterReader) Read(b []byte) (int, error) {
	n, err := r.r.Read(b)
	r.m.add(int64(n))
	return n, err
}

// meterWriter counts what is written through it.
type meterWriter struct {
	w io.Writer
	m *meter
}

func (w meterWriter) Write(b []byte) (int, error) {
	n, err := w.w.Write(b)
	w.m.add(int64(n))
	return n, err
}

// importLogPeriod is how often an import from the import folder logs how far
// it got; one that takes less says nothing until its end.
const importLogPeriod = 5 * time.Second

// logProgress logs an import's progress at most every importLogPeriod, the
// first time one period after its start.
func logProgress(logger *slog.Logger) func(Progress) {
	last := time.Now()
	return func(p Progress) {
		if time.Since(last) < importLogPeriod {
			return
		}
		last = time.Now()
		logger.Info("importing images", "phase", p.Phase, "layers", fmt.Sprintf("%d/%d", p.LayersDone, p.Layers),
			"bytes", fmt.Sprintf("%d/%d", p.BytesDone, p.Bytes))
	}
}
