package main

import (
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/mirror"
	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/agent/source"
)

// auxiliary is how the daemon's auxiliary parts are doing, shown by
// /healthz?verbose and appended to STATUS=. They never stop a pod, so a
// failing one does not make the daemon unhealthy.
type auxiliary struct {
	url atomic.Pointer[source.URL] // nil without staticPodURL; a reload changes it
	// urlRequests counts the requests of every URL source the daemon ran.
	urlRequests source.RequestCounts
	mirror      *mirror.Mirror // nil without a kubeconfig
	parts       []*part        // the read-only port, the image import watcher
	reloadNote
}

// part is how an auxiliary part that the daemon restarts is doing.
type part struct {
	name string // as /healthz?verbose names it
	what string // as STATUS= names it

	mu    sync.Mutex // guards err and since
	err   error
	since time.Time
}

func (x *auxiliary) add(name, what string) *part {
	p := &part{name: name, what: what}
	x.parts = append(x.parts, p)
	return p
}

// set records how the part does; it reports whether that changed.
func (p *part) set(err error) bool {
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

func (p *part) get() (error, time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err, p.since
}

func (x *auxiliary) checks() []server.Check {
	var out []server.Check
	if url := x.url.Load(); url != nil {
		st := url.Status()
		out = append(out, server.Check{Name: "manifest-url", Err: st.Err, Since: st.Since})
	}
	if x.mirror != nil {
		since, err := x.mirror.Status()
		out = append(out, server.Check{Name: "mirror-pods", Err: err, Since: since})
	}
	for _, p := range x.parts {
		err, since := p.get()
		out = append(out, server.Check{Name: p.name, Err: err, Since: since})
	}
	return out
}

// trouble is what STATUS= adds to the agent's summary: each failing part and why.
func (x *auxiliary) trouble() string {
	var parts []string
	if url := x.url.Load(); url != nil {
		if st := url.Status(); st.Err != nil {
			// The error names the URL first.
			parts = append(parts, "manifest URL "+st.Err.Error())
		}
	}
	if x.mirror != nil {
		if _, err := x.mirror.Status(); err != nil {
			parts = append(parts, "API server "+strings.ReplaceAll(err.Error(), "\n", "; "))
		}
	}
	for _, p := range x.parts {
		if err, _ := p.get(); err != nil {
			parts = append(parts, p.what+": "+err.Error())
		}
	}
	if n := x.reloadNote.reloadNote(); n != "" {
		parts = append(parts, n)
	}
	return strings.Join(parts, "; ")
}

// served is the agent as the HTTP server shows it, with the auxiliary parts
// for /healthz?verbose.
type served struct {
	*agent.Agent
	aux *auxiliary
}

func (s served) Checks() []server.Check { return s.aux.checks() }

// URLRequests is staticpodd_manifest_url_requests_total's figures.
func (s served) URLRequests() (total, failed uint64, ok bool) {
	if s.aux.url.Load() == nil {
		return 0, 0, false
	}
	failed = s.aux.urlRequests.Failed.Load() // before Total: never more than it
	return s.aux.urlRequests.Total.Load(), failed, true
}

var _ server.Checker = served{}

// statusLine sends STATUS=: the agent's summary, then what fails among the
// auxiliary parts.
type statusLine struct {
	notifier *readyNotifier
	aux      *auxiliary

	mu      sync.Mutex // guards the fields below
	summary string     // the agent's last
	gate    string     // what READY=1 waits for (--ready-when); "" once ready
	last    string     // the last line sent
}

// setGate puts what READY=1 waits for in front of the line; "" removes it.
func (s *statusLine) setGate(waiting string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gate = waiting
	s.sendLocked(false)
}

// waitingFor is what READY=1 still waits for; "" once ready or ungated.
func (s *statusLine) waitingFor() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.gate
}

// Status takes a new summary from the agent (or a reload) and sends the line.
func (s *statusLine) Status(summary string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.summary = summary
	s.sendLocked(true)
}

// refresh sends the line again when an auxiliary part changed it.
func (s *statusLine) refresh() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sendLocked(false)
}

func (s *statusLine) sendLocked(always bool) {
	line := s.summary
	if s.gate != "" {
		line = s.gate + "; " + line
	}
	if t := s.aux.trouble(); t != "" {
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

// agentNotifier is the agent's Notifier: systemd, with STATUS= composed by
// statusLine.
type agentNotifier struct {
	*readyNotifier
	line *statusLine
}

func (n agentNotifier) Status(s string) { n.line.Status(s) }
