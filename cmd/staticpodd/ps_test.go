package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/prober"
	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/daemon"
)

type psAgent struct{}

func (psAgent) Pods() []v1.Pod {
	started := metav1.NewTime(time.Now().Add(-5 * time.Minute))
	return []v1.Pod{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: "u-web"},
			Spec:       v1.PodSpec{NodeName: "node1", Containers: []v1.Container{{Name: "httpd"}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, PodIP: "127.0.0.1", StartTime: &started,
				ContainerStatuses: []v1.ContainerStatus{{Name: "httpd", Image: "busybox", Ready: true, RestartCount: 1,
					ContainerID: "staticpodd://abc123", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}}},
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "etcd-node1", Namespace: "kube-system"},
			Spec:       v1.PodSpec{Containers: []v1.Container{{Name: "etcd"}}},
			Status: v1.PodStatus{Phase: v1.PodRunning, StartTime: &started,
				ContainerStatuses: []v1.ContainerStatus{{Name: "etcd", RestartCount: 4,
					State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}}}}},
		},
	}
}

func (psAgent) NodeName() string { return "node1" }

func (psAgent) StatsSummary(context.Context) (*podspec.Summary, error) {
	u := podspec.Usage{CPUUsageNanos: 1500e6, MemoryWorkingSet: 24 << 20, Pids: 3}
	return &podspec.Summary{Pods: []podspec.PodStats{{UID: "u-web", Name: "web-node1", Namespace: "default", Usage: u,
		Containers: []podspec.ContainerStats{{Name: "httpd", Usage: u, RootfsBytes: 12 << 10, LogsBytes: 300}}}}}, nil
}

func (psAgent) PressureConditions() []v1.NodeCondition {
	return []v1.NodeCondition{
		{Type: v1.NodeMemoryPressure, Status: v1.ConditionTrue, Message: "kubelet has insufficient memory available",
			LastTransitionTime: metav1.NewTime(time.Now().Add(-2 * time.Minute))},
		{Type: v1.NodeDiskPressure, Status: v1.ConditionFalse, Message: "kubelet has no disk pressure"},
	}
}

func (psAgent) Problems() []manifest.Problem {
	return []manifest.Problem{{Origin: "/etc/kubernetes/manifests/bad.yaml", Err: errors.New("no containers")}}
}

func (psAgent) LogFile(_ context.Context, ns, pod, ctr string, previous bool) (string, error) {
	return "", errors.New("no logs here")
}

func (psAgent) LogEnded(ns, pod, ctr, path string) bool { return true }
func (psAgent) Changed() <-chan struct{}                { return nil }

func (psAgent) Probes() []prober.Status {
	return []prober.Status{
		{Namespace: "default", Pod: "web-node1", Container: "httpd", Probe: prober.Liveness, Result: "success", At: time.Now()},
		{Namespace: "default", Pod: "web-node1", Container: "httpd", Probe: prober.Readiness, Result: "failure",
			Output: "HTTP probe failed\nwith statuscode: 503", At: time.Now().Add(-time.Minute)},
	}
}

func (psAgent) ExecTarget(ns, pod, ctr string) (string, error) {
	return "", errors.New("no exec here")
}

func (psAgent) Debug(string, string, podspec.DebugRequest) (func(context.Context, podspec.ExecSpec) (int, error), error) {
	return nil, errors.New("no debug here")
}

func (psAgent) Exec(context.Context, string, podspec.ExecSpec) (int, error) {
	return -1, errors.New("no exec here")
}

// serveDaemon serves the daemon's API on <dir>/staticpodd.sock.
func serveDaemon(t *testing.T, dir string) {
	t.Helper()
	l, err := server.ListenUnix(filepath.Join(dir, socketName))
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: server.CLI(psAgent{}, slog.New(slog.NewTextHandler(io.Discard, nil)))}
	go srv.Serve(l)
	t.Cleanup(func() { srv.Close() })
}

func runPs(t *testing.T, runDir string, args ...string) (string, error) {
	t.Helper()
	cmd := newPsCmd(&globalOptions{RunDir: runDir})
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(io.Discard)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

func TestPs(t *testing.T) {
	dir := t.TempDir()
	serveDaemon(t, dir)
	out, err := runPs(t, dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range [][]string{
		{"NAMESPACE", "NAME", "READY", "STATUS", "RESTARTS", "AGE"},
		{"default", "web-node1", "1/1", "Running", "1", "5m"},
		{"kube-system", "etcd-node1", "0/1", "CrashLoopBackOff", "4", "5m"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("ps output lacks row %q:\n%s", row, out)
		}
	}
	if want := "Manifest problems:\n  /etc/kubernetes/manifests/bad.yaml: no containers"; !strings.Contains(out, want) {
		t.Errorf("ps output lacks %q:\n%s", want, out)
	}
	if want := "Node under pressure:\n  MemoryPressure (since 2m): kubelet has insufficient memory available\n"; !strings.Contains(out, want) {
		t.Errorf("ps output lacks %q:\n%s", want, out)
	}
	if strings.Contains(out, "DiskPressure") {
		t.Errorf("ps shows a condition that is false:\n%s", out)
	}
	if strings.Contains(out, "abc123") {
		t.Errorf("plain ps shows container IDs:\n%s", out)
	}

	out, err = runPs(t, dir, "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range [][]string{
		{"default", "web-node1", "1/1", "Running", "1", "5m", "127.0.0.1", "node1", "1.5s", "24Mi", "3"},
		{"default/web-node1", "httpd", "Running", "1", "liveness:ok,readiness:fail", "24Mi", "12Ki", "300", "abc123", "busybox"},
		{"kube-system/etcd-node1", "etcd", "Waiting:CrashLoopBackOff", "4", "<none>", "-", "-", "-", "<none>"},
	} {
		if !hasRow(out, row...) {
			t.Errorf("ps -o wide output lacks row %q:\n%s", row, out)
		}
	}

	if want := "Failing probes:\n  default/web-node1 httpd readiness probe (60s ago): HTTP probe failed with statuscode: 503"; !strings.Contains(out, want) {
		t.Errorf("ps -o wide output lacks %q:\n%s", want, out)
	}

	out, err = runPs(t, dir, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list v1.PodList
	if err := json.Unmarshal([]byte(out), &list); err != nil || list.Kind != "PodList" || len(list.Items) != 2 {
		t.Errorf("ps -o json = %q (%v), want a PodList of 2", out, err)
	}
}

func TestPsDaemonNotRunning(t *testing.T) {
	_, err := runPs(t, t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "staticpodd is not running") {
		t.Errorf("err = %v, want it to say the daemon is not running", err)
	}
}

func TestPsRejectsUnknownFormat(t *testing.T) {
	if _, err := runPs(t, t.TempDir(), "-o", "yaml"); err == nil {
		t.Error("ps -o yaml succeeded")
	}
}

// hasRow reports whether a line of out has exactly these fields.
func hasRow(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		if slices.Equal(strings.Fields(line), fields) {
			return true
		}
	}
	return false
}

// /healthz?verbose names the pressure conditions, and stays "passed": the
// daemon evicts, it is not unhealthy.
func TestHealthzShowsPressure(t *testing.T) {
	dir := t.TempDir()
	serveDaemon(t, dir)
	body, err := daemon.NewClient(filepath.Join(dir, socketName)).Get(t.Context(), "/healthz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	out := string(body)
	for _, want := range []string{"[-]memory-pressure failed since ", ": kubelet has insufficient memory available\n", "[+]disk-pressure ok\n", "healthz check passed"} {
		if !strings.Contains(out, want) {
			t.Errorf("healthz lacks %q:\n%s", want, out)
		}
	}
}
