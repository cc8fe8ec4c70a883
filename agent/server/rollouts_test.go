package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/agent/rollout"
)

// rolloutAgent keeps one history, of default/web-node1, and undoes when
// undo is set (a daemon); without it, it is the records.
type rolloutAgent struct {
	fakeAgent
	history rollout.History
	damaged error
}

func (r rolloutAgent) Rollout(ns, name string) (rollout.History, error) {
	if ns != "default" || name != "web-node1" {
		return rollout.History{Namespace: ns, Name: name}, nil
	}
	return r.history, r.damaged
}
func (r rolloutAgent) RollbackAfter(ns, name string) time.Duration { return 90 * time.Second }
func (r rolloutAgent) RolloutNames() ([]string, error)             { return []string{"default/web-node1"}, nil }

type undoAgent struct{ rolloutAgent }

func (u undoAgent) Undo(ns, name string) (*rollout.Generation, error) {
	if name != "web-node1" {
		return nil, errors.New("no pod " + ns + "/" + name)
	}
	return &rollout.Generation{UID: "a"}, nil
}

func TestRolloutEndpoints(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	h := rollout.History{Namespace: "default", Name: "web-node1"}
	h.Start(rollout.Generation{UID: "a", Manifest: "m"}, t0)
	h.Ready("a", t0, nil)
	h.Start(rollout.Generation{UID: "b", Manifest: "m"}, t0)
	h.Fail("b", t0, "container web CrashLoopBackOff", nil, rollout.ByDeadline, h.Find("a"))
	records := rolloutAgent{fakeAgent: testAgent, history: h, damaged: errors.New("rollout history X is damaged")}

	srv := httptest.NewServer(CLI(records, logger()))
	defer srv.Close()
	code, _, body := get(t, srv.Client(), srv.URL+"/rollouts/default/web-node1")
	var r Rollout
	if err := json.Unmarshal(body, &r); code != 200 || err != nil {
		t.Fatalf("GET /rollouts/default/web-node1: %d %v %s", code, err, body)
	}
	if !r.Status.Failed() || !strings.Contains(r.Status.Message, "CrashLoopBackOff") || len(r.History.Generations) != 2 || r.Damaged == "" {
		t.Errorf("rollout %+v", r)
	}
	if code, _, body := get(t, srv.Client(), srv.URL+"/rollouts"); code != 200 || string(body) != `["default/web-node1"]` {
		t.Errorf("GET /rollouts: %d %s", code, body)
	}
	// The records cannot undo: only a daemon stops and starts pods.
	resp, err := srv.Client().Post(srv.URL+"/rollouts/default/web-node1/undo", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("undo from the records: %d", resp.StatusCode)
	}

	daemon := httptest.NewServer(CLI(undoAgent{records}, logger()))
	defer daemon.Close()
	for path, want := range map[string]int{"/rollouts/default/web-node1/undo": 200, "/rollouts/default/other/undo": http.StatusConflict} {
		resp, err := daemon.Client().Post(daemon.URL+path, "", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("POST %s: %d, want %d", path, resp.StatusCode, want)
		}
	}
	// Undo is a POST only.
	if code, _, _ := get(t, daemon.Client(), daemon.URL+"/rollouts/default/web-node1/undo"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET of undo: %d", code)
	}
}
