// Package server serves the agent's view over HTTP: /healthz, /pods, stats and
// metrics like the kubelet's read-only port, the node API, and /problems,
// container logs and exec for the CLI.
package server

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/prober"
)

// Agent is what the server shows; *agent.Agent implements it.
type Agent interface {
	// Pods is every pod with its status, sorted by full name: a list of
	// the caller's own, which /pods changes.
	Pods() []v1.Pod
	Problems() []manifest.Problem
	// LogFile is the CRI log file of a container's run: the one the kubelet's
	// logs show (its running or last run), or its last ended run with previous.
	LogFile(ctx context.Context, namespace, pod, container string, previous bool) (string, error)
	// Probes are the last results of the probes of running containers.
	Probes() []prober.Status
	// Events are what happened to pods, kept and to come.
	Events() *events.Recorder
	// ExecTarget is the ID of a running container to exec in; errors wrap
	// podspec.ErrNotExist or podspec.ErrNotRunning.
	ExecTarget(namespace, pod, container string) (string, error)
	// Exec runs spec in container id and returns its exit code.
	Exec(ctx context.Context, id string, spec podspec.ExecSpec) (int, error)
	// Debug checks a debug container's request for pod namespace/name and
	// takes its slot; run, which must be called once, runs it with spec's
	// streams and removes it (see agent.Agent.Debug). Errors wrap
	// podspec.ErrNotExist, ErrNotRunning, ErrDebugInvalid or ErrDebugLimit.
	Debug(namespace, pod string, req podspec.DebugRequest) (run func(ctx context.Context, spec podspec.ExecSpec) (int, error), err error)
	// LogEnded reports whether the container whose log file is path will
	// write no more logs, in that run or a later one.
	LogEnded(namespace, pod, container, path string) bool
	// Changed returns a channel closed at the next change of a pod's
	// status, after which LogEnded may say otherwise.
	Changed() <-chan struct{}
}

// SandboxReporter is implemented by an Agent that tells each pod's place on
// the pod network.
type SandboxReporter interface {
	SandboxStatus(ctx context.Context, uid string) (podspec.SandboxStatus, error)
}

// Lister is implemented by an Agent that, just started, does not list every
// pod at once (agent.Agent.Listed): the channel is closed once it does.
type Lister interface {
	Listed() <-chan struct{}
}

// listWaitMax is how long after the CLI socket begins to serve its requests
// wait for a daemon just started to list its pods: one whose pod's first
// sync is stuck, or whose sources never speak (the kubelet personality
// before kubeadm wrote its configuration), answers with what it has,
// within the client's own deadline (10 s), and at once from then on.
var listWaitMax = 5 * time.Second

// afterListed serves h once a, if a Lister, lists every pod it started
// with, or once listWaitMax has passed since the handler was made:
// `staticpodd ps` (exec, logs, debug) right after a restart would otherwise
// be told of no pod, while the pods run on.
func afterListed(a Agent, h http.Handler) http.Handler {
	l, ok := a.(Lister)
	if !ok {
		return h
	}
	until := time.Now().Add(listWaitMax)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-l.Listed():
		default:
			wait := time.Until(until)
			if wait <= 0 {
				break
			}
			t := time.NewTimer(wait)
			select {
			case <-l.Listed():
			case <-t.C:
			case <-r.Context().Done():
				t.Stop()
				return
			}
			t.Stop()
		}
		h.ServeHTTP(w, r)
	})
}

// PodNetwork is a pod's network as JSON (/networks): the CNI network and
// plugins it got, or why it has none, and, when the configuration changed
// since, what a pod made now would get.
type PodNetwork struct {
	Namespace string               `json:"namespace"`
	Pod       string               `json:"pod"`
	Network   string               `json:"network,omitempty"`
	Source    string               `json:"source,omitempty"`
	Plugins   []string             `json:"plugins,omitempty"`
	Message   string               `json:"message,omitempty"`
	Chosen    *podspec.NetworkConf `json:"chosen,omitempty"`
}

// String is how ps -o wide shows n, on one line: the pod, its network, and
// a warning when a pod made now would get another.
func (n PodNetwork) String() string {
	s := fmt.Sprintf("%s/%s: %s", n.Namespace, n.Pod, podspec.NetworkConf{Network: n.Network, Source: n.Source, Plugins: n.Plugins, Why: n.Message})
	if n.Chosen != nil {
		s += "; WARNING: the CNI configuration changed, a pod made now gets " + n.Chosen.String()
	}
	return s
}

// Problem is a manifest problem as JSON.
type Problem struct {
	Origin string `json:"origin"`
	Error  string `json:"error"`
	// Warning: the manifest is used all the same (manifest.Problem.Warning).
	Warning bool `json:"warning,omitempty"`
}

// ReadOnly returns the handler of the read-only port, without authentication,
// with what the kubelet's serves (its InstallAuthNotRequiredHandlers):
// /healthz, /pods, /stats/summary, and /metrics, /metrics/cadvisor,
// /metrics/probes and /metrics/resource from m (none with m nil), which the
// node API shares. /healthz?verbose lists the auxiliary parts when a
// implements Checker.
func ReadOnly(a Agent, m *Metrics, logger *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	readOnly(mux, a, m, logger)
	return m.instrument(mux, "readonly")
}

// CLI returns the handler of the CLI socket (mode 0600): the read-only port's,
// plus /problems, /networks (which CNI configuration file each pod's network
// came from), /probes (whose output may echo a container's answers),
// /events, container logs, exec and debug, which may hold secrets or run anything
// in a container and so are never served without authentication (the
// kubelet serves them only on its authenticated port), and restart, which
// stops a pod.
func CLI(a Agent, logger *slog.Logger) http.Handler {
	mux := http.NewServeMux()
	readOnly(mux, a, nil, logger)
	mux.HandleFunc("GET /problems", func(w http.ResponseWriter, r *http.Request) {
		out := []Problem{}
		for _, p := range a.Problems() {
			msg := ""
			if p.Err != nil {
				// Manifest errors name their file already; say it once.
				msg = strings.ReplaceAll(p.Err.Error(), p.Origin+": ", "")
			}
			out = append(out, Problem{Origin: p.Origin, Error: msg, Warning: p.Warning})
		}
		writeJSON(w, logger, out)
	})
	mux.HandleFunc("GET /probes", func(w http.ResponseWriter, r *http.Request) {
		out := a.Probes()
		if out == nil {
			out = []prober.Status{}
		}
		writeJSON(w, logger, out)
	})
	mux.HandleFunc("GET /networks", func(w http.ResponseWriter, r *http.Request) {
		out := []PodNetwork{}
		sr, ok := a.(SandboxReporter)
		for _, p := range a.Pods() {
			if !ok || p.Spec.HostNetwork {
				continue
			}
			st, err := sr.SandboxStatus(r.Context(), string(p.UID))
			if err != nil {
				continue // no sandbox (yet, or any more)
			}
			out = append(out, PodNetwork{Namespace: p.Namespace, Pod: p.Name, Network: st.Network, Source: st.Source,
				Plugins: st.Plugins, Message: st.Message, Chosen: st.Chosen})
		}
		writeJSON(w, logger, out)
	})
	// A container's log, followed or not, is as long as the container made it
	// and read as slowly as the client pages through it: a stream.
	mux.Handle("GET /containerLogs/{namespace}/{pod}/{container}", stream(containerLogs(a, logger), logger))
	// Events may carry what probes read and error messages: the CLI's only.
	// Watched, they are a stream.
	mux.Handle("GET /events", stream(eventsHandler(a, logger), logger))
	mux.HandleFunc("POST /exec/{namespace}/{pod}/{container}", execHandler(a, logger))
	mux.HandleFunc("POST /exec", execByNameHandler(a, logger))
	rollouts(mux, a, logger)
	mux.HandleFunc("POST /debug/{namespace}/{pod}", debugHandler(a, logger))
	mux.HandleFunc("POST /restart/{namespace}/{pod}", restartHandler(a, logger))
	return afterListed(a, mux)
}

// readOnly adds what the read-only port serves to mux: m's metrics, unless
// m is nil.
func readOnly(mux *http.ServeMux, a Agent, m *Metrics, logger *slog.Logger) {
	mux.HandleFunc("GET /stats/summary", statsSummary(a, logger))
	if m != nil {
		mux.Handle("GET /metrics", m.handler(m.main, logger))
		mux.Handle("GET /metrics/cadvisor", m.handler(m.cadvisor, logger))
		mux.Handle("GET /metrics/probes", m.handler(m.probes, logger))
		mux.Handle("GET /metrics/resource", m.handler(m.resource, logger))
	}
	mux.HandleFunc("GET /healthz", healthz(a))
	mux.HandleFunc("GET /healthz/{name}", healthzCheck(a))
	mux.HandleFunc("GET /pods", func(w http.ResponseWriter, r *http.Request) {
		list := v1.PodList{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
			Items:    a.Pods(),
		}
		if list.Items == nil {
			list.Items = []v1.Pod{}
		}
		for i := range list.Items {
			// The list names the kind once; the kubelet's items carry no
			// apiVersion or kind of their own.
			list.Items[i].TypeMeta = metav1.TypeMeta{}
		}
		writeJSON(w, logger, list)
	})
}

func writeJSON(w http.ResponseWriter, logger *slog.Logger, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		logger.Error("encode response failed", "err", err)
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
