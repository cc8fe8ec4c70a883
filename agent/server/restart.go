package server

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/rollout"
)

// Restarter is implemented by an Agent that makes a new generation of a pod
// from the same manifest (staticpodd restart).
type Restarter interface {
	// RestartPod returns the pod's restartedAt; its error wraps
	// podspec.ErrNotExist when no manifest defines the pod, and
	// rollout.ErrRolledBack when it runs a generation rolled back to.
	RestartPod(namespace, name string) (string, error)
}

// Restarted is the answer to POST /restart/{namespace}/{pod}.
type Restarted struct {
	Namespace   string `json:"namespace"`
	Pod         string `json:"pod"`
	RestartedAt string `json:"restartedAt"`
}

// restartHandler serves POST /restart/{namespace}/{pod}. A POST only, on the
// CLI socket only: it stops a pod.
func restartHandler(a Agent, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ra, ok := a.(Restarter)
		if !ok {
			http.Error(w, "restart: not supported by this daemon", http.StatusNotImplemented)
			return
		}
		ns, pod := r.PathValue("namespace"), r.PathValue("pod")
		at, err := ra.RestartPod(ns, pod)
		if err != nil {
			code := http.StatusInternalServerError
			switch {
			case errors.Is(err, podspec.ErrNotExist):
				code = http.StatusNotFound
			case errors.Is(err, rollout.ErrRolledBack):
				code = http.StatusConflict
			}
			http.Error(w, err.Error(), code)
			return
		}
		writeJSON(w, logger, Restarted{Namespace: ns, Pod: pod, RestartedAt: at})
	}
}
