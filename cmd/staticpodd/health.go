package main

import (
	"strings"
	"sync"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/agent/source"
)

// auxiliary is how the daemon's auxiliary parts are doing, shown by
// /healthz?verbose and appended to STATUS=. They never stop a pod, so a
// failing one does not make the daemon unhealthy.
type auxiliary struct {
	url *source.URL // nil without staticPodURL
	reloadNote
}

func (x *auxiliary) checks() []server.Check {
	var out []server.Check
	if x.url != nil {
		st := x.url.Status()
		out = append(out, server.Check{Name: "manifest-url", Err: st.Err, Since: st.Since})
	}
	return out
}

// trouble is what STATUS= adds to the agent's summary: each failing part and why.
func (x *auxiliary) trouble() string {
	var parts []string
	if x.url != nil {
		if st := x.url.Status(); st.Err != nil {
			// The error names the URL first.
			parts = append(parts, "manifest URL "+st.Err.Error())
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
