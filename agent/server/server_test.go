package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/prober"
	"github.com/staticpodd/staticpodd/agent/status"
)

var _ Agent = (*agent.Agent)(nil)

// The exec by name hands the agent the pod it found: one copy of the node's
// pods an exec, not two.
var _ podExecTargeter = (*agent.Agent)(nil)

type fakeAgent struct {
	pods     []v1.Pod
	problems []manifest.Problem
	logFile  string
	probes   []prober.Status
	events   *events.Recorder
	exec     func(ctx context.Context, id string, spec podspec.ExecSpec) (int, error)
}

func (f fakeAgent) Events() *events.Recorder {
	if f.events == nil {
		return events.New("node1", 0, slog.New(slog.DiscardHandler))
	}
	return f.events
}

func (f fakeAgent) Probes() []prober.Status { return f.probes }

// Pods is a list of the caller's own, as the agent's (a copy): /pods
// changes its items.
func (f fakeAgent) Pods() []v1.Pod { return slices.Clone(f.pods) }

// PodFigures reads f.pods as the agent's status manager reads its own.
func (f fakeAgent) PodFigures(fn func(*status.Figures)) { status.FiguresOf(f.pods, fn) }
func (f fakeAgent) Problems() []manifest.Problem        { return f.problems }
func (f fakeAgent) LogFile(_ context.Context, ns, pod, ctr string, previous bool) (string, error) {
	if f.logFile == "" || pod != "web-node1" {
		return "", errors.New("no logs")
	}
	return f.logFile, nil
}
func (f fakeAgent) LogEnded(ns, pod, ctr, path string) bool { return false }
func (f fakeAgent) Changed() <-chan struct{}                { return nil }

// ExecTarget knows container web of web-node1 as c1, running, and its
// container stopped as not running; any container of evil-node1 as c2.
func (f fakeAgent) ExecTarget(ns, pod, ctr string) (string, error) {
	switch {
	case pod == "web-node1" && ctr == "web":
		return "c1", nil
	case pod == "evil-node1":
		return "c2", nil
	case pod == "web-node1" && ctr == "stopped":
		return "", fmt.Errorf("container stopped is terminated: %w", podspec.ErrNotRunning)
	}
	return "", fmt.Errorf("pod %s/%s: %w", ns, pod, podspec.ErrNotExist)
}

// Debug runs in pod web-node1 only, as exec does (f.exec, with id "debug").
func (f fakeAgent) Debug(ns, pod string, req podspec.DebugRequest) (func(context.Context, podspec.ExecSpec) (int, error), error) {
	if pod != "web-node1" {
		return nil, fmt.Errorf("pod %s/%s: %w", ns, pod, podspec.ErrNotExist)
	}
	if req.Image == "" {
		return nil, fmt.Errorf("%w: no image", podspec.ErrDebugInvalid)
	}
	return func(ctx context.Context, spec podspec.ExecSpec) (int, error) { return f.Exec(ctx, "debug", spec) }, nil
}

func (f fakeAgent) Exec(ctx context.Context, id string, spec podspec.ExecSpec) (int, error) {
	if f.exec == nil {
		return 0, nil
	}
	return f.exec(ctx, id, spec)
}

var testAgent = fakeAgent{
	pods: []v1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: "u1"},
		Status: v1.PodStatus{Phase: v1.PodRunning, ContainerStatuses: []v1.ContainerStatus{{
			Name: "web", RestartCount: 2, State: v1.ContainerState{Running: &v1.ContainerStateRunning{}},
		}}},
	}},
	problems: []manifest.Problem{{Origin: "/m/bad.yaml", Err: errors.New("line 3: did not find expected key")}},
	probes:   []prober.Status{{Namespace: "default", Pod: "web-node1", Container: "web", Probe: prober.Readiness, Result: "failure", Output: "HTTP probe failed with statuscode: 503"}},
}

func logger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func get(t *testing.T, c *http.Client, url string) (int, string, []byte) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Content-Type"), b
}

func TestEndpoints(t *testing.T) {
	srv := httptest.NewServer(CLI(testAgent, logger()))
	defer srv.Close()

	if code, _, body := get(t, srv.Client(), srv.URL+"/healthz"); code != 200 || string(body) != "ok" {
		t.Errorf("/healthz = %d %q", code, body)
	}

	code, ctype, body := get(t, srv.Client(), srv.URL+"/pods")
	var list v1.PodList
	if err := json.Unmarshal(body, &list); err != nil || code != 200 || ctype != "application/json" {
		t.Fatalf("/pods = %d %s %q: %v", code, ctype, body, err)
	}
	if list.APIVersion != "v1" || list.Kind != "PodList" || len(list.Items) != 1 ||
		list.Items[0].Status.ContainerStatuses[0].RestartCount != 2 {
		t.Errorf("/pods = %+v", list)
	}
	// As the kubelet's: the list has a kind, its items none of their own.
	if bytes.Contains(body, []byte(`"kind":"Pod"`)) || list.Items[0].APIVersion != "" {
		t.Errorf("/pods items carry apiVersion or kind: %s", body)
	}

	_, _, body = get(t, srv.Client(), srv.URL+"/problems")
	var probs []Problem
	if err := json.Unmarshal(body, &probs); err != nil || len(probs) != 1 ||
		probs[0] != (Problem{Origin: "/m/bad.yaml", Error: "line 3: did not find expected key"}) {
		t.Errorf("/problems = %s (%v)", body, err)
	}

	_, _, body = get(t, srv.Client(), srv.URL+"/probes")
	var probes []prober.Status
	if err := json.Unmarshal(body, &probes); err != nil || len(probes) != 1 || probes[0].Output != "HTTP probe failed with statuscode: 503" {
		t.Errorf("/probes = %s (%v)", body, err)
	}
	// Probe output is a container's answer: not on the read-only port.
	ro := httptest.NewServer(ReadOnly(testAgent, nil, logger()))
	defer ro.Close()
	if code, _, _ := get(t, ro.Client(), ro.URL+"/probes"); code != http.StatusNotFound {
		t.Errorf("read-only /probes = %d, want 404", code)
	}

	if code, _, _ := get(t, srv.Client(), srv.URL+"/nope"); code != http.StatusNotFound {
		t.Errorf("/nope = %d, want 404", code)
	}
}

func TestEmptyPodListIsAnEmptyArray(t *testing.T) {
	srv := httptest.NewServer(CLI(fakeAgent{}, logger()))
	defer srv.Close()
	_, _, body := get(t, srv.Client(), srv.URL+"/pods")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil || string(raw["items"]) != "[]" {
		t.Errorf("/pods with no pods = %s, want items []", body)
	}
}

func TestListenUnix(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run", "staticpodd.sock")
	// A stale socket from a daemon that died.
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	stale, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()

	l, err := ListenUnix(path)
	if err != nil {
		t.Fatalf("ListenUnix over a stale socket: %v", err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode = %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	if _, err := ListenUnix(path); err == nil {
		t.Error("a second ListenUnix on a live socket succeeded")
	}

	srv := &http.Server{Handler: CLI(testAgent, logger())}
	go srv.Serve(l)
	defer srv.Close()
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", path)
	}}}
	if code, _, body := get(t, c, "http://staticpodd/healthz"); code != 200 || string(body) != "ok" {
		t.Errorf("/healthz over the socket = %d %q", code, body)
	}
}

func TestListenUnixRefusesNonSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "staticpodd.sock")
	if err := os.WriteFile(path, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ListenUnix(path); err == nil {
		t.Fatal("ListenUnix replaced a regular file")
	}
	if b, _ := os.ReadFile(path); string(b) != "precious" {
		t.Error("the file was changed")
	}
}

// /containerLogs gives the container's output as written: CRI framing gone,
// partial lines joined.
func TestContainerLogs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "0.log")
	cri := "2026-11-30T06:00:00.000000001Z stdout F hello\n" +
		"2026-11-30T06:00:00.000000002Z stderr F oops\n" +
		"2026-11-30T06:00:00.000000003Z stdout P part one, \n" +
		"2026-11-30T06:00:00.000000004Z stdout F part two\n" +
		"2026-11-30T06:00:00.000000005Z stdout F \n"
	if err := os.WriteFile(file, []byte(cri), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(CLI(fakeAgent{logFile: file}, slog.New(slog.DiscardHandler)))
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/containerLogs/default/web-node1/main")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := "hello\noops\npart one, part two\n\n"; string(body) != want {
		t.Errorf("logs = %q, want %q", body, want)
	}
	resp, err = http.Get(srv.URL + "/containerLogs/default/nothere/main")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("logs of a missing pod: status %d, want 404", resp.StatusCode)
	}
}

// The read-only port serves what the kubelet's does, unauthenticated, and
// nothing more: no container logs, no manifest problems.
func TestReadOnlyPortServesNoLogs(t *testing.T) {
	file := filepath.Join(t.TempDir(), "0.log")
	os.WriteFile(file, []byte("2026-11-30T06:00:00Z stdout F secret\n"), 0o600)
	srv := httptest.NewServer(ReadOnly(fakeAgent{logFile: file}, nil, logger()))
	defer srv.Close()
	if code, _, _ := get(t, srv.Client(), srv.URL+"/pods"); code != http.StatusOK {
		t.Errorf("/pods = %d, want 200", code)
	}
	for _, path := range []string{"/containerLogs/default/web-node1/main", "/problems"} {
		if code, _, body := get(t, srv.Client(), srv.URL+path); code != http.StatusNotFound {
			t.Errorf("read-only port %s = %d %q, want 404", path, code, body)
		}
	}
}

// A manifest error that names its file already is not shown with the path twice.
func TestProblemNamesItsFileOnce(t *testing.T) {
	a := fakeAgent{problems: []manifest.Problem{{Origin: "/m/bad.yaml", Err: errors.New("/m/bad.yaml: spec.containers: at least one container is required")}}}
	srv := httptest.NewServer(CLI(a, logger()))
	defer srv.Close()
	_, _, body := get(t, srv.Client(), srv.URL+"/problems")
	var probs []Problem
	if err := json.Unmarshal(body, &probs); err != nil || len(probs) != 1 ||
		probs[0] != (Problem{Origin: "/m/bad.yaml", Error: "spec.containers: at least one container is required"}) {
		t.Errorf("/problems = %s (%v)", body, err)
	}
}
