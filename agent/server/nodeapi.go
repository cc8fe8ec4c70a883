package server

import (
	"log/slog"
	"net/http"
)

// NodeConfig is what the node API serves besides the agent's view.
type NodeConfig struct {
	// Auth authenticates and authorizes every request; nil lets nobody in.
	Auth    *Auth
	Metrics *Metrics
	// HostLogDir is the directory /logs/ serves (the host's /var/log).
	HostLogDir string
	// Configz returns the effective configuration for /configz.
	Configz func() any
}

// NodeMaxConns caps the connections of the node API (port): monitoring
// agents, the API server's proxy and log streams.
const NodeMaxConns = 128

// Node returns the handler of the node API, the kubelet's authenticated
// port: every request is authenticated and authorized (Auth.guard) before
// anything else is read. It serves the read-only port's /healthz, /pods and
// /stats/summary, and /metrics, /metrics/cadvisor, /metrics/probes, /metrics/resource,
// /containerLogs, /logs/ and /configz, with the kubelet's paths and formats.
func Node(a Agent, cfg NodeConfig, logger *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	readOnly(mux, a, logger)
	if m := cfg.Metrics; m != nil {
		mux.Handle("GET /metrics", m.handler(m.main, logger))
		mux.Handle("GET /metrics/cadvisor", m.handler(m.cadvisor, logger))
		mux.Handle("GET /metrics/probes", m.handler(m.probes, logger))
		mux.Handle("GET /metrics/resource", m.handler(m.resource, logger))
	}
	mux.Handle("GET /containerLogs/{namespace}/{pod}/{container}", stream(containerLogs(a, logger), logger))
	if cfg.HostLogDir != "" {
		mux.Handle("GET /logs/{path...}", hostLogs(cfg.HostLogDir, logger))
	}
	if cfg.Configz != nil {
		// The kubelet's /configz: {"kubeletconfig": <the configuration>}.
		mux.HandleFunc("GET /configz", func(w http.ResponseWriter, r *http.Request) {
			writeJSON(w, logger, map[string]any{"kubeletconfig": cfg.Configz()})
		})
	}
	// The kubelet's streaming endpoints are not served here: staticpodd
	// exec on the node's CLI socket is the only way into a container.
	for _, p := range []string{"/exec/", "/attach/", "/portForward/", "/run/", "/cri/", "/debug/", "/checkpoint/"} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "not served by staticpodd's node API; use staticpodd exec on the node", http.StatusNotImplemented)
		})
	}
	auth := cfg.Auth
	if auth == nil {
		auth = &Auth{} // nobody authenticates
	}
	return cfg.Metrics.instrument(auth.guard(mux, logger), "readwrite")
}
