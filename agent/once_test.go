package agent

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

func TestOnceOutcome(t *testing.T) {
	running := v1.ContainerStatus{Name: "a", State: v1.ContainerState{Running: &v1.ContainerStateRunning{}}}
	creating := v1.ContainerStatus{Name: "a", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reasonCreating}}}
	crashloop := v1.ContainerStatus{Name: "a",
		State:                v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reasonCrashLoop, Message: "back-off 10s"}},
		LastTerminationState: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 1, Reason: "Error"}}}
	noImage := v1.ContainerStatus{Name: "b", State: v1.ContainerState{Waiting: &v1.ContainerStateWaiting{Reason: reasonImageNeverPull, Message: "not present"}}}
	failed := v1.ContainerStatus{Name: "a", State: v1.ContainerState{Terminated: &v1.ContainerStateTerminated{ExitCode: 3, Reason: "Error"}}}
	for _, tc := range []struct {
		name    string
		policy  v1.RestartPolicy
		phase   v1.PodPhase
		ctrs    []v1.ContainerStatus
		outcome string
		msg     string
	}{
		{"running", v1.RestartPolicyAlways, v1.PodRunning, []v1.ContainerStatus{running}, OnceRunning, ""},
		{"not started yet", v1.RestartPolicyAlways, v1.PodPending, []v1.ContainerStatus{creating}, OncePending, ""},
		{"one of two running", v1.RestartPolicyAlways, v1.PodPending, []v1.ContainerStatus{running, creating}, OncePending, ""},
		{"crash loop is waited out", v1.RestartPolicyAlways, v1.PodRunning, []v1.ContainerStatus{crashloop}, OncePending, "a: CrashLoopBackOff: back-off 10s"},
		{"image missing fails at once", v1.RestartPolicyAlways, v1.PodPending, []v1.ContainerStatus{running, noImage}, OnceFailed, "b: ErrImageNeverPull: not present"},
		{"Never, still running", v1.RestartPolicyNever, v1.PodRunning, []v1.ContainerStatus{running}, OncePending, ""},
		{"Never, succeeded", v1.RestartPolicyNever, v1.PodSucceeded, nil, OnceSucceeded, ""},
		{"Never, failed", v1.RestartPolicyNever, v1.PodFailed, []v1.ContainerStatus{failed}, OnceFailed, "a: Error"},
		{"OnFailure, restarting", v1.RestartPolicyOnFailure, v1.PodRunning, []v1.ContainerStatus{crashloop}, OncePending, "a: CrashLoopBackOff: back-off 10s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &v1.Pod{Spec: v1.PodSpec{RestartPolicy: tc.policy}, Status: v1.PodStatus{Phase: tc.phase, ContainerStatuses: tc.ctrs}}
			if outcome, msg := onceOutcome(p); outcome != tc.outcome || msg != tc.msg {
				t.Errorf("outcome %s %q, want %s %q", outcome, msg, tc.outcome, tc.msg)
			}
		})
	}
}

// run --once waits until each pod runs or finished, and fails at once a pod
// whose image is missing; manifest problems are results too.
func TestWaitOnceSettles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.missing["etcd:3.5"] = true
		h := start(t, rt, Config{})
		bad := manifest.Problem{Origin: "/m/bad.yaml", Err: errors.New("/m/bad.yaml: spec.containers: at least one container is required")}
		// A warning: its pod (web) runs; it is no result of its own.
		warned := manifest.Problem{Origin: "/m/web.yaml", Err: errors.New("/m/web.yaml: spec.containers[0].comand: unknown field, ignored"), Warning: true}
		type result struct {
			results []OnceResult
			settled bool
		}
		done := make(chan result, 1)
		go func() {
			r, s := h.a.WaitOnce(t.Context())
			done <- result{r, s}
		}()
		h.send([]manifest.Pod{
			testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox")),
			testPod("job", "u2", v1.RestartPolicyNever, ctr("b", "busybox")),
			testPod("etcd", "u3", v1.RestartPolicyAlways, ctr("etcd", "etcd:3.5")),
		}, bad, warned)
		select {
		case <-done:
			t.Fatal("settled while the job still runs")
		default:
		}
		rt.Exit(strings.TrimPrefix(h.pod("job").Status.ContainerStatuses[0].ContainerID, containerIDPrefix), 0)
		synctest.Wait()
		var r result
		select {
		case r = <-done:
		default:
			t.Fatal("not settled once the job finished")
		}
		got := map[string]string{}
		for _, res := range r.results {
			var name string
			if res.Pod != nil {
				name = res.Pod.Name
			} else {
				name = res.Problem.Origin
			}
			got[name] = res.Outcome
		}
		want := map[string]string{"web-node1": OnceRunning, "job-node1": OnceSucceeded, "etcd-node1": OnceFailed, "/m/bad.yaml": OnceInvalid}
		if !r.settled || len(got) != len(want) {
			t.Fatalf("settled %v, results %v", r.settled, got)
		}
		for k, v := range want {
			if got[k] != v {
				t.Errorf("%s: %s, want %s", k, got[k], v)
			}
		}
		var reasons []string
		for _, e := range h.a.Events().List() {
			if e.InvolvedObject.Kind == "Node" && e.Type == v1.EventTypeWarning {
				reasons = append(reasons, e.Reason+": "+e.Message)
			}
		}
		if !slices.Contains(reasons, "ManifestWarning: Manifest /m/web.yaml is used, but: spec.containers[0].comand: unknown field, ignored") ||
			!slices.Contains(reasons, "FailedValidation: Error validating manifest /m/bad.yaml: spec.containers: at least one container is required") {
			t.Errorf("node warning events %q, want the warning's and the error's", reasons)
		}
	})
}

// A crash-looping pod that is to finish is waited for until ctx ends; it is
// then Pending, and says why.
func TestWaitOnceTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["a"] = 1
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("job", "u1", v1.RestartPolicyOnFailure, ctr("a", "busybox"))})
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		results, settled := h.a.WaitOnce(ctx)
		if settled || len(results) != 1 || results[0].Outcome != OncePending ||
			!strings.HasPrefix(results[0].Message, "a: CrashLoopBackOff: back-off") {
			t.Errorf("settled %v, results %+v", settled, results)
		}
	})
}
