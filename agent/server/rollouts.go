package server

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/staticpodd/staticpodd/agent/rollout"
)

// RolloutKeeper is implemented by an Agent that keeps the pods' rollout
// histories (agent/rollout), the daemon's or its records on disk.
type RolloutKeeper interface {
	// Rollout is the history of the pod namespace/name, and why a history
	// found damaged was started afresh.
	Rollout(namespace, name string) (rollout.History, error)
	// RollbackAfter is the pod's staticpodd.io/rollback-after, 0 if none.
	RollbackAfter(namespace, name string) time.Duration
	// RolloutNames are the pods, namespace/name, that have a history.
	RolloutNames() ([]string, error)
}

// RolloutUndoer is implemented by an Agent that can roll a pod back at the
// operator's request: a running daemon.
type RolloutUndoer interface {
	Undo(namespace, name string) (*rollout.Generation, error)
}

// Rollout is GET /rollouts/{namespace}/{pod}: the pod's history and where
// its current generation is.
type Rollout struct {
	History rollout.History `json:"history"`
	Status  rollout.Status  `json:"status"`
	// Damaged says why the history on disk could not be read.
	Damaged string `json:"damaged,omitempty"`
}

// Undone is POST /rollouts/{namespace}/{pod}/undo's answer: the generation
// that runs now.
type Undone struct {
	UID string `json:"uid"`
}

// errNoUndo answers an undo without a daemon: only it runs pods.
var errNoUndo = errors.New("rollout undo needs the daemon running: it is what stops and starts pods")

func rollouts(mux *http.ServeMux, a Agent, logger *slog.Logger) {
	mux.HandleFunc("GET /rollouts", func(w http.ResponseWriter, r *http.Request) {
		k, ok := a.(RolloutKeeper)
		if !ok {
			http.Error(w, "no rollout histories are kept", http.StatusNotFound)
			return
		}
		names, err := k.RolloutNames()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if names == nil {
			names = []string{}
		}
		writeJSON(w, logger, names)
	})
	mux.HandleFunc("GET /rollouts/{namespace}/{pod}", func(w http.ResponseWriter, r *http.Request) {
		k, ok := a.(RolloutKeeper)
		if !ok {
			http.Error(w, "no rollout histories are kept", http.StatusNotFound)
			return
		}
		ns, name := r.PathValue("namespace"), r.PathValue("pod")
		h, err := k.Rollout(ns, name)
		out := Rollout{History: h, Status: h.Status(k.RollbackAfter(ns, name))}
		if err != nil {
			out.Damaged = err.Error()
		}
		writeJSON(w, logger, out)
	})
	mux.HandleFunc("POST /rollouts/{namespace}/{pod}/undo", func(w http.ResponseWriter, r *http.Request) {
		u, ok := a.(RolloutUndoer)
		if !ok {
			http.Error(w, errNoUndo.Error(), http.StatusServiceUnavailable)
			return
		}
		g, err := u.Undo(r.PathValue("namespace"), r.PathValue("pod"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		writeJSON(w, logger, Undone{UID: g.UID})
	})
}
