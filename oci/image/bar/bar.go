// Package bar shows how far an image pull, import or export got: a
// progress bar (bytes, rate, layers) when the output is a terminal, and a
// line every few seconds when it is not (a log, a pipe, a CI job), so that
// a long transfer over a slow link never looks hung.
package bar

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/staticpodd/staticpodd/oci/image"
)

// LinePeriod is how often a Bar that is not on a terminal writes a line,
// whether bytes came or not: a transfer that stalls says so too.
const LinePeriod = 5 * time.Second

// Bar shows the Progress of one transfer. Done must be called at its end.
type Bar struct {
	w    io.Writer
	what string
	tty  bool

	mu         sync.Mutex
	p          image.Progress
	updated    bool
	phase      string
	phaseStart time.Time
	bar        *progressbar.ProgressBar // on a terminal: the bar of the phase under way
	bytes      int64                    // the total the bar was made for

	stop, stopped chan struct{} // off a terminal: the line writer's
}

// New is a Bar for the transfer named what (e.g. "pull docker.io/library/busybox:1.36")
// that writes to w: a bar if w is a terminal, lines otherwise.
func New(w io.Writer, what string) *Bar {
	f, ok := w.(*os.File)
	b := &Bar{w: w, what: what, tty: ok && term.IsTerminal(int(f.Fd())), phaseStart: time.Now()}
	if !b.tty {
		b.stop, b.stopped = make(chan struct{}), make(chan struct{})
		go b.lines()
	}
	return b
}

// lines writes a line every LinePeriod until Done.
func (b *Bar) lines() {
	defer close(b.stopped)
	t := time.NewTicker(LinePeriod)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case now := <-t.C:
			b.mu.Lock()
			fmt.Fprintln(b.w, b.line(now))
			b.mu.Unlock()
		}
	}
}

// Update shows p. It is safe to call from any goroutine.
func (b *Bar) Update(p image.Progress) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.p, b.updated = p, true
	newPhase := p.Phase != b.phase
	if newPhase {
		b.phase, b.phaseStart = p.Phase, time.Now()
	}
	if !b.tty {
		return
	}
	if b.bar != nil && b.bar.IsFinished() && !newPhase && p.Bytes == b.bytes {
		return // drawn complete, its line ended
	}
	if b.bar == nil || newPhase || p.Bytes != b.bytes {
		b.finishBar()
		b.bytes = p.Bytes
		max := p.Bytes
		if max <= 0 {
			max = -1 // a spinner: the total is not known
		}
		b.bar = progressbar.NewOptions64(max,
			progressbar.OptionSetWriter(b.w),
			progressbar.OptionShowBytes(true),
			progressbar.OptionShowCount(),
			progressbar.OptionUseIECUnits(true),
			progressbar.OptionSetWidth(30),
			progressbar.OptionThrottle(100*time.Millisecond),
			progressbar.OptionSetPredictTime(max > 0),
			progressbar.OptionOnCompletion(func() { fmt.Fprintln(b.w) }),
		)
	}
	b.bar.Describe(b.describe())
	done := p.BytesDone
	if p.Bytes > 0 {
		// Full only at Done: all of a pull's bytes may have come while its
		// last layer is unpacked, and an export's total is an estimate.
		done = min(done, p.Bytes-1)
	}
	_ = b.bar.Set64(done)
}

// Done ends the display: a terminal's bar is completed and its line ended;
// off a terminal the lines stop (the caller says the result).
func (b *Bar) Done() {
	if !b.tty {
		select {
		case <-b.stop:
		default:
			close(b.stop)
		}
		<-b.stopped
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.finishBar()
}

func (b *Bar) finishBar() {
	if b.bar != nil && !b.bar.IsFinished() {
		_ = b.bar.Finish()
	}
	b.bar = nil
}

func (b *Bar) describe() string {
	d := b.what
	if b.p.Phase != "" {
		d += " (" + b.p.Phase + ")"
	}
	if b.p.Layers > 0 {
		d += fmt.Sprintf(" %d/%d layers", b.p.LayersDone, b.p.Layers)
	}
	return d
}

// line is the line written off a terminal, e.g.
// "pull busybox:1.36 1/3 layers: 12.0 MiB of 40.0 MiB, 2.4 MiB/s"; before
// the first progress, "pull busybox:1.36: waiting, 5s".
func (b *Bar) line(now time.Time) string {
	elapsed := now.Sub(b.phaseStart)
	if !b.updated {
		return fmt.Sprintf("%s: waiting, %s", b.describe(), elapsed.Round(time.Second))
	}
	s := b.describe() + ": " + MiB(b.p.BytesDone)
	if b.p.Bytes > 0 {
		s += " of " + MiB(b.p.Bytes)
	}
	if secs := elapsed.Seconds(); secs > 0 {
		s += fmt.Sprintf(", %s/s", MiB(int64(float64(b.p.BytesDone)/secs)))
	}
	return s
}

// MiB is n bytes in MiB with one decimal.
func MiB(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// Option is the option that has an import or export show its progress on b.
func (b *Bar) Option() image.TransferOption { return image.WithProgress(b.Update, 0) }
