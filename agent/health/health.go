// Package health keeps how the daemon's auxiliary parts are doing (the
// manifest URL, the API server's mirror, the listeners it restarts, the import
// watcher, the last reload) for /healthz?verbose, and composes systemd's
// STATUS= line from the agent's summary, what READY=1 waits for and what of
// them fails. An auxiliary part never stops a pod, so a failing one does not
// make the daemon unhealthy: it is retried.
package health

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/agent/source"
)

// Parts is how the daemon's auxiliary parts are doing, shown by
// /healthz?verbose and appended to STATUS=. They never stop a pod, so a
// failing one does not make the daemon unhealthy.
type Parts struct {
	URL atomic.Pointer[source.URL] // nil without staticPodURL; a reload changes it
	// URLRequests counts the requests of every URL source the daemon ran.
	URLRequests source.RequestCounts
	Mirror      Mirror // nil without a kubeconfig
	// Logger says when a part starts failing and when it works again.
	Logger *slog.Logger
	// Line is sent again when a part's state changed.
	Line  *Line
	parts []*Part // the read-only port, the node API, the image import watcher
	reloadNote
}

// Mirror is the API server's mirror (agent/mirror) as its health shows: when
// it started failing, and why; nil error when it works.
type Mirror interface {
	Status() (since time.Time, err error)
}

// Part is how an auxiliary part that the daemon restarts is doing.
type Part struct {
	name string // as /healthz?verbose names it
	what string // as STATUS= names it

	mu    sync.Mutex // guards err and since
	err   error
	since time.Time
}

// Add is a new part that the daemon restarts: name as /healthz?verbose
// names it, what as STATUS= does.
func (x *Parts) Add(name, what string) *Part {
	p := &Part{name: name, what: what}
	x.parts = append(x.parts, p)
	return p
}

// Set records how the part does; it reports whether that changed.
func (p *Part) Set(err error) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case err == nil && p.err == nil:
		return false
	case err == nil:
		p.err = nil
		return true
	case p.err == nil:
		p.err, p.since = err, time.Now()
		return true
	}
	changed := p.err.Error() != err.Error()
	p.err = err
	return changed
}

// Get is the part's last failure, nil if it works, and since when it fails.
func (p *Part) Get() (error, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err, p.since
}

// Checks are the parts as /healthz?verbose shows them.
func (x *Parts) Checks() []server.Check {
	var out []server.Check
	if url := x.URL.Load(); url != nil {
		st := url.Status()
		out = append(out, server.Check{Name: "manifest-url", Err: st.Err, Since: st.Since})
	}
	if x.Mirror != nil {
		since, err := x.Mirror.Status()
		out = append(out, server.Check{Name: "mirror-pods", Err: err, Since: since})
	}
	for _, p := range x.parts {
		err, since := p.Get()
		out = append(out, server.Check{Name: p.name, Err: err, Since: since})
	}
	return out
}

// Trouble is what STATUS= adds to the agent's summary: each failing part and why.
func (x *Parts) Trouble() string {
	var parts []string
	if url := x.URL.Load(); url != nil {
		if st := url.Status(); st.Err != nil {
			// The error names the URL first.
			parts = append(parts, "manifest URL "+st.Err.Error())
		}
	}
	if x.Mirror != nil {
		if _, err := x.Mirror.Status(); err != nil {
			parts = append(parts, "API server "+strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	for _, p := range x.parts {
		if err, _ := p.Get(); err != nil {
			parts = append(parts, p.what+": "+err.Error())
		}
	}
	if n := x.reloadNote.reloadNote(); n != "" {
		parts = append(parts, n)
	}
	return strings.Join(parts, "; ")
}

// Notifier sends systemd's STATUS=.
type Notifier interface {
	Status(string)
}

// Line sends STATUS=: the agent's summary, then what fails among the
// auxiliary parts.
type Line struct {
	notifier Notifier
	parts    *Parts

	mu      sync.Mutex // guards the fields below
	summary string     // the agent's last
	gate    string     // what READY=1 waits for (--ready-when); "" once ready
	last    string     // the last line sent
}

// NewLine is the STATUS= line of parts, sent through n; parts' changes
// send it again.
func NewLine(n Notifier, parts *Parts) *Line {
	l := &Line{notifier: n, parts: parts}
	parts.Line = l
	return l
}

// SetGate puts what READY=1 waits for in front of the line; "" removes it.
func (s *Line) SetGate(waiting string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = waiting
	s.sendLocked(false)
}

// WaitingFor is what READY=1 still waits for; "" once ready or ungated.
func (s *Line) WaitingFor() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gate
}

// Status takes a new summary from the agent (or a reload) and sends the line.
func (s *Line) Status(summary string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.summary = summary
	s.sendLocked(true)
}

// Refresh sends the line again when an auxiliary part changed it.
func (s *Line) Refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendLocked(false)
}

func (s *Line) sendLocked(always bool) {
	line := s.summary
	if s.gate != "" {
		line = s.gate + "; " + line
	}
	if t := s.parts.Trouble(); t != "" {
		if line != "" {
			line += "; "
		}
		line += t
	}
	if !always && line == s.last {
		return
	}
	s.last = line
	s.notifier.Status(line)
}

// Retry runs auxiliary part p's run until ctx ends: each failure is logged
// when it changes, shown in /healthz?verbose and STATUS=, and retried after
// an exponential back-off with jitter (0.5s to 30s).
func (x *Parts) Retry(ctx context.Context, p *Part, run func(context.Context) error) {
	wait := time.Duration(0)
	for {
		err := run(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil {
			err = errors.New("stopped unexpectedly")
		}
		wait = min(max(wait*2, 500*time.Millisecond), 30*time.Second)
		x.SetPart(p, err)
		t := time.NewTimer(time.Duration(float64(wait) * (0.75 + rand.Float64()/2)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// SetPart records how p does, and says so when that changed.
func (x *Parts) SetPart(p *Part, err error) {
	if !p.Set(err) {
		return
	}
	if err != nil {
		x.Logger.Error("auxiliary part failing; retrying", "part", p.name, "err", err)
	} else {
		x.Logger.Info("auxiliary part working", "part", p.name)
	}
	x.Line.Refresh()
}

// reloadNote is what the last reload left to say in STATUS=: a change that
// needs a restart, or a configuration that did not load.
type reloadNote struct {
	mu   sync.Mutex // guards note
	note string
}

// SetReload is what the last reload leaves to say; "" for nothing.
func (r *reloadNote) SetReload(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.note = s
}

func (r *reloadNote) reloadNote() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.note
}
