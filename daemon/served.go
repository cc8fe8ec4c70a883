package daemon

import (
	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/health"
	"github.com/staticpodd/staticpodd/agent/server"
)

// served is the agent as the HTTP server shows it, with the auxiliary parts
// for /healthz?verbose.
type served struct {
	*agent.Agent
	aux *health.Parts
}

func (s served) Checks() []server.Check {
	err, since := s.RolloutTrouble()
	return append(s.aux.Checks(), server.Check{Name: "rollouts", Err: err, Since: since})
}

// URLRequests is staticpodd_manifest_url_requests_total's figures.
func (s served) URLRequests() (total, failed uint64, ok bool) {
	if s.aux.URL.Load() == nil {
		return 0, 0, false
	}
	failed = s.aux.URLRequests.Failed.Load() // before Total: never more than it
	return s.aux.URLRequests.Total.Load(), failed, true
}

var (
	_ server.Checker   = served{}
	_ server.Restarter = served{}
)

// agentNotifier is the agent's Notifier: systemd, with STATUS= composed by
// health.Line.
type agentNotifier struct {
	*readyNotifier
	line *health.Line
}

func (n agentNotifier) Status(s string) { n.line.Status(s) }
