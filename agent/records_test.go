package agent

import (
	"context"
	"encoding/json"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/status"
)

// A stopped daemon's records give the pods it ran: named as it named them
// (its node's name, not this host's), their containers' current and last
// runs, their start times, their logs, and where exec may go; a pod whose
// manifest was not kept still shows its containers.
func TestRecords(t *testing.T) {
	root, logs := t.TempDir(), t.TempDir()
	const webUID, orphanUID = "0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"
	started := time.Date(2026, 1, 2, 3, 0, 0, 0, time.UTC)
	seen := started.Add(-time.Second)
	b, err := json.Marshal(stored{Source: manifest.SourceFile, Origin: "/m/web.yaml", Manifest: []byte(`apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop}
spec:
  containers:
  - {name: main, image: busybox, readinessProbe: {exec: {command: ["true"]}}}
`)})
	if err != nil {
		t.Fatal(err)
	}
	pd := poddir.Root(root)
	for file, data := range map[string][]byte{pd.Manifest(webUID): b, pd.Started(webUID): []byte(started.Format(time.RFC3339Nano)),
		pd.Seen(webUID):                       []byte(seen.Format(time.RFC3339Nano)),
		pd.ProbeMark(webUID, "web1", "ready"): nil} {
		if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	webLogs := filepath.Join(logs, "shop_web-node1_"+webUID, "main")
	if err := os.MkdirAll(webLogs, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"0.log", "1.log"} {
		if err := os.WriteFile(filepath.Join(webLogs, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctr := func(uid, pod, ns, name, id string, attempt int, state podspec.State, at time.Time) podspec.ContainerStatus {
		c := podspec.ContainerStatus{ID: id, PodUID: uid, PodName: pod, PodNamespace: ns, Name: name, Attempt: attempt,
			State: state, CreatedAt: at, StartedAt: at.Add(time.Second), Image: "busybox",
			LogPath: filepath.Join(logs, ns+"_"+pod+"_"+uid, name, string(rune('0'+attempt))+".log")}
		if state == podspec.StateExited {
			c.ExitCode, c.Reason, c.FinishedAt = 2, "Error", at.Add(time.Minute)
		}
		return c
	}
	containers := []podspec.ContainerStatus{
		ctr(webUID, "web-node1", "shop", "main", "web0", 0, podspec.StateExited, started),
		ctr(webUID, "web-node1", "shop", "main", "web1", 1, podspec.StateRunning, started.Add(time.Hour)),
		ctr(orphanUID, "gone-node1", "default", "c", "gone0", 0, podspec.StateExited, started),
		ctr("../escape", "x-node1", "default", "c", "x0", 0, podspec.StateRunning, started),
		ctr(orphanUID, "gone-node1", "default", "lost", "lost0", 0, podspec.StateUnknown, started),
	}
	containers[len(containers)-1].Message = "its monitor is gone"
	sandboxes := map[string]podspec.SandboxStatus{webUID: {IPs: []netip.Addr{netip.MustParseAddr("10.88.0.5")}}}
	r := NewRecords(root, containers, sandboxes, nil, started.Add(2*time.Hour))

	pods := r.Pods()
	if len(pods) != 2 {
		t.Fatalf("%d pods, want web and gone: %+v", len(pods), pods)
	}
	gone, web := pods[0], pods[1]
	if web.Name != "web-node1" || web.Namespace != "shop" || web.Spec.NodeName != "node1" || string(web.UID) != webUID {
		t.Errorf("web is %s/%s on %q, uid %s", web.Namespace, web.Name, web.Spec.NodeName, web.UID)
	}
	if web.Annotations[manifest.AnnotationHash] != webUID || web.Annotations[manifest.AnnotationSeen] != seen.Format(time.RFC3339Nano) {
		t.Errorf("web's annotations: %v", web.Annotations)
	}
	if web.Status.StartTime == nil || !web.Status.StartTime.Time.Equal(started) || web.Status.PodIP != "10.88.0.5" {
		t.Errorf("web's start time %v, IP %q", web.Status.StartTime, web.Status.PodIP)
	}
	cs := web.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Running == nil || cs[0].RestartCount != 1 || !cs[0].Ready ||
		cs[0].LastTerminationState.Terminated == nil || cs[0].LastTerminationState.Terminated.ExitCode != 2 ||
		cs[0].ContainerID != status.ContainerIDPrefix+"web1" {
		t.Errorf("web's container: %+v", cs)
	}
	if gone.Name != "gone-node1" || len(gone.Status.ContainerStatuses) != 2 ||
		gone.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("the pod without a kept manifest: %+v", gone)
	} else if w := gone.Status.ContainerStatuses[1].State.Waiting; w == nil || w.Reason != "ContainerStatusUnknown" || w.Message != "its monitor is gone" {
		t.Errorf("the container whose monitor is gone: %+v", gone.Status.ContainerStatuses[1])
	}

	if f, err := r.LogFile(context.Background(), "shop", "web-node1", "main", false); err != nil || f != filepath.Join(webLogs, "1.log") {
		t.Errorf("LogFile = %q, %v", f, err)
	}
	if f, err := r.LogFile(context.Background(), "shop", "web-node1", "main", true); err != nil || f != filepath.Join(webLogs, "0.log") {
		t.Errorf("LogFile previous = %q, %v", f, err)
	}
	if id, err := r.ExecTarget("shop", "web-node1", "main"); err != nil || id != "web1" {
		t.Errorf("ExecTarget = %q, %v", id, err)
	}
	if _, err := r.ExecTarget("default", "gone-node1", "c"); !errors.Is(err, podspec.ErrNotRunning) {
		t.Errorf("ExecTarget of an exited container: %v", err)
	}
	evs := r.Events().List()
	var reasons []string
	for _, e := range evs {
		reasons = append(reasons, e.Reason+" "+e.InvolvedObject.Name+" "+e.LastTimestamp.UTC().Format(time.TimeOnly))
	}
	want := []string{"Created web-node1 03:00:00", "Created gone-node1 03:00:00", "Created gone-node1 03:00:00",
		"Started web-node1 03:00:01", "Started gone-node1 03:00:01", "Started gone-node1 03:00:01",
		"Created web-node1 04:00:00", "Started web-node1 04:00:01"}
	if len(reasons) != len(want) {
		t.Fatalf("events %q, want %q", reasons, want)
	}
	for i := range want {
		if reasons[i] != want[i] {
			t.Errorf("events %q, want %q", reasons, want)
			break
		}
	}
}
