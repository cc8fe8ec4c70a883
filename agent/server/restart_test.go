package server

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/rollout"
)

// restartAgent restarts web-node1 only.
type restartAgent struct{ fakeAgent }

func (restartAgent) RestartPod(ns, pod string) (string, error) {
	if ns == "default" && pod == "web-node1" {
		return "2026-01-01T00:00:00Z", nil
	}
	if ns == "default" && pod == "rolledback-node1" {
		return "", fmt.Errorf("pod %s/%s: %w", ns, pod, rollout.ErrRolledBack)
	}
	return "", fmt.Errorf("pod %s/%s: no manifest defines it: %w", ns, pod, podspec.ErrNotExist)
}

func TestRestartEndpoint(t *testing.T) {
	srv := httptest.NewServer(CLI(restartAgent{testAgent}, logger()))
	defer srv.Close()
	plain := httptest.NewServer(CLI(testAgent, logger()))
	defer plain.Close()
	for _, tc := range []struct {
		url, method string
		code        int
	}{
		{srv.URL + "/restart/default/web-node1", http.MethodPost, http.StatusOK},
		{srv.URL + "/restart/default/nosuch", http.MethodPost, http.StatusNotFound},
		{srv.URL + "/restart/default/rolledback-node1", http.MethodPost, http.StatusConflict},
		{srv.URL + "/restart/default/web-node1", http.MethodGet, http.StatusMethodNotAllowed}, // a change: never a GET
		{plain.URL + "/restart/default/web-node1", http.MethodPost, http.StatusNotImplemented},
	} {
		req, _ := http.NewRequest(tc.method, tc.url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != tc.code {
			t.Errorf("%s %s: %d, want %d", tc.method, tc.url, resp.StatusCode, tc.code)
		}
		if tc.code == http.StatusOK {
			var r Restarted
			if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r != (Restarted{"default", "web-node1", "2026-01-01T00:00:00Z"}) {
				t.Errorf("answer %+v, %v", r, err)
			}
		}
		resp.Body.Close()
	}
}
