package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// orderedPod is a pod that starts after the pods named in after (none when
// ""), whose container runs cmd (a sleeper's loop when ""), with a
// readiness probe when probe is set.
func orderedPod(name, after, cmd, probe string, grace int) string {
	ann := ""
	if after != "" {
		ann = fmt.Sprintf("  annotations:\n    staticpodd.io/start-after: %q\n", after)
	}
	if cmd == "" {
		cmd = "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
%sspec:
  terminationGracePeriodSeconds: %d
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", %q]
%s`, name, ann, grace, cmd, probe)
}

// readyFile is a readiness probe that passes once /tmp/ready exists.
const readyFile = `    readinessProbe:
      exec: {command: ["cat", "/tmp/ready"]}
      periodSeconds: 1
`

func podCondition(p *v1.Pod, t v1.PodConditionType) *v1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// At the daemon's start, the API server waits for etcd's readiness probe
// to pass: ps, the pod's status and an event say so, and its container
// starts only once etcd is Ready.
func TestStartAfterWaitsForReadiness(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("etcd.yaml", orderedPod("etcd", "",
		"sleep 4; touch /tmp/ready; trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done", readyFile, 3))
	d.WriteManifest("kube-apiserver.yaml", orderedPod("kube-apiserver", "etcd", "", "", 3))
	d.Start()

	want := "etcd-" + d.Name + " not Ready"
	d.Eventually(20*time.Second, "ps shows the API server waiting for etcd", func() error {
		out := d.CLI("ps")
		status := false
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 3 && f[1] == "kube-apiserver-"+d.Name && f[3] == "WaitingForDependency" {
				status = true
			}
		}
		why := "  default/kube-apiserver-" + d.Name + " WaitingForDependency: " + want
		if !status || !strings.Contains(out, "Waiting for other pods:\n"+why+"\n") {
			return fmt.Errorf("ps:\n%s", out)
		}
		return nil
	})
	if p := d.Pod("kube-apiserver"); p == nil || len(p.Status.ContainerStatuses) != 1 ||
		p.Status.ContainerStatuses[0].State.Waiting == nil || p.Status.ContainerStatuses[0].State.Waiting.Message != want {
		t.Fatalf("the API server's status while etcd is not Ready: %+v", p)
	}

	api := d.WaitRunning("kube-apiserver", 60*time.Second)
	etcd := d.Pod("etcd")
	readyAt := podCondition(etcd, v1.PodReady)
	if readyAt == nil || readyAt.Status != v1.ConditionTrue {
		t.Fatalf("the API server runs, etcd is not Ready: %+v", etcd.Status)
	}
	apiStarted := api.Status.ContainerStatuses[0].State.Running.StartedAt
	etcdStarted := etcd.Status.ContainerStatuses[0].State.Running.StartedAt
	t.Logf("etcd started %v, Ready %v; the API server started %v", etcdStarted, readyAt.LastTransitionTime, apiStarted)
	if apiStarted.Before(&readyAt.LastTransitionTime) {
		t.Errorf("the API server started at %v, before etcd was Ready at %v", apiStarted, readyAt.LastTransitionTime)
	}
	// etcd is Ready 4s after it starts: a start with no wait would be
	// within a second of it.
	if gap := apiStarted.Sub(etcdStarted.Time); gap < 3*time.Second {
		t.Errorf("the API server started %v after etcd, before etcd's readiness could pass", gap)
	}
	found := false
	for _, e := range events(d) {
		if e.Reason == "WaitingForDependency" && e.InvolvedObject.Name == "kube-apiserver-"+d.Name {
			found = e.Type == v1.EventTypeNormal && strings.Contains(e.Message, want)
		}
	}
	if !found {
		t.Errorf("no WaitingForDependency event saying %q:\n%s", want, d.CLI("events"))
	}
}

// A start-after cycle and a name no manifest defines are refused by
// validate, naming the file and the field, and shown as manifest problems
// by the daemon, whose other pods run.
func TestStartAfterCycleRefused(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("a.yaml", orderedPod("a", "b", "", "", 3))
	d.WriteManifest("b.yaml", orderedPod("b", "a", "", "", 3))
	d.WriteManifest("c.yaml", orderedPod("c", "nosuch", "", "", 3))
	d.WriteManifest("web.yaml", orderedPod("web", "", "", "", 3))

	out, err := d.CLIErr("validate", "--hostname-override", d.Name, d.Manifests)
	if err == nil {
		t.Fatalf("validate accepted a cycle:\n%s", out)
	}
	field := "metadata.annotations[staticpodd.io/start-after]"
	for _, want := range []string{
		"error: " + d.Manifests + "/a.yaml: " + field + ": start-after makes a cycle (a, b, a)",
		"error: " + d.Manifests + "/b.yaml: " + field + ": start-after makes a cycle (a, b, a)",
		"error: " + d.Manifests + "/c.yaml: " + field + ": no manifest defines pod nosuch in namespace default",
		"ok: " + d.Manifests + "/web.yaml",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("validate does not say %q:\n%s", want, out)
		}
	}

	d.Start()
	d.WaitRunning("web", 30*time.Second)
	d.Eventually(10*time.Second, "the problems in ps -o wide", func() error {
		out := d.CLI("ps", "-o", "wide")
		for _, want := range []string{"Manifest problems:", "a.yaml", "b.yaml", "start-after makes a cycle", "no manifest defines pod nosuch"} {
			if !strings.Contains(out, want) {
				return fmt.Errorf("no %q in ps -o wide:\n%s", want, out)
			}
		}
		return nil
	})
	for _, name := range []string{"a", "b", "c"} {
		p := d.Pod(name)
		if p == nil || p.Status.ContainerStatuses[0].State.Waiting == nil || p.Status.ContainerStatuses[0].State.Waiting.Reason != "WaitingForDependency" {
			t.Errorf("pod %s: %+v", name, p)
		}
	}
	// The pod named comes: c starts; the cycle stays a problem.
	d.WriteManifest("nosuch.yaml", orderedPod("nosuch", "", "", "", 3))
	d.WaitRunning("c", 30*time.Second)
	if out := d.CLI("ps", "-o", "wide"); !strings.Contains(out, "start-after makes a cycle") || strings.Contains(out, "no manifest defines") {
		t.Errorf("ps -o wide once nosuch is there:\n%s", out)
	}
}

// The manifests of etcd and of the API server that starts after it are
// removed, etcd's first (rm of a directory in name order): the API server
// stops first, its slow stop (3s) waited for, then etcd.
func TestStopOrderOnRemoval(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("etcd.yaml", orderedPod("etcd", "", "", "", 10))
	d.WriteManifest("kube-apiserver.yaml", orderedPod("kube-apiserver", "etcd",
		"trap 'sleep 3; exit 0' TERM; while true; do sleep 1 & wait $!; done", "", 10))
	d.Start()
	d.WaitRunning("kube-apiserver", 30*time.Second)

	d.RemoveManifest("etcd.yaml")
	d.RemoveManifest("kube-apiserver.yaml")
	d.Eventually(40*time.Second, "both pods gone", func() error {
		if n := len(d.Pods()); n != 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	})
	killing := map[string]v1.Event{}
	var stoppingAfter *v1.Event
	for _, e := range events(d) {
		switch e.Reason {
		case "Killing":
			killing[strings.TrimSuffix(e.InvolvedObject.Name, "-"+d.Name)] = e
		case "StoppingAfterDependents":
			stoppingAfter = &e
		}
	}
	api, etcd := killing["kube-apiserver"], killing["etcd"]
	if api.Reason == "" || etcd.Reason == "" {
		t.Fatalf("Killing events: %+v\n%s", killing, d.CLI("events"))
	}
	t.Logf("the API server killed at %v, etcd at %v", api.FirstTimestamp, etcd.FirstTimestamp)
	if gap := etcd.FirstTimestamp.Sub(api.FirstTimestamp.Time); gap < 2*time.Second {
		t.Errorf("etcd was stopped %v after the API server, which takes 3s to stop", gap)
	}
	if stoppingAfter == nil || stoppingAfter.InvolvedObject.Name != "etcd-"+d.Name || !strings.Contains(stoppingAfter.Message, "kube-apiserver-"+d.Name) {
		t.Errorf("StoppingAfterDependents event: %+v", stoppingAfter)
	}
}
