package agent

import (
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/prober"
)

func TestPlan(t *testing.T) {
	running := func(uid, name, id string, attempt int) podspec.ContainerStatus {
		return podspec.ContainerStatus{ID: id, PodUID: uid, Name: name, Attempt: attempt, Hash: "h-" + name, State: podspec.StateRunning}
	}
	exited := func(uid, name, id string, attempt, code int) podspec.ContainerStatus {
		c := running(uid, name, id, attempt)
		c.State, c.ExitCode = podspec.StateExited, code
		return c
	}
	withGrace := func(c podspec.ContainerStatus, grace time.Duration) podspec.ContainerStatus {
		c.TerminationGracePeriod = grace
		return c
	}
	desired := func(uid string, policy v1.RestartPolicy, init []string, names ...string) *desiredPod {
		p := testPod("web", uid, policy)
		d := &desiredPod{pod: p.Pod, hashes: map[string]string{}}
		for _, n := range init {
			p.Spec.InitContainers = append(p.Spec.InitContainers, ctr(n, "busybox"))
			d.hashes[n] = "h-" + n
		}
		for _, n := range names {
			p.Spec.Containers = append(p.Spec.Containers, ctr(n, "busybox"))
			d.hashes[n] = "h-" + n
		}
		return d
	}
	pods := func(ps ...*podState) map[string]*podState {
		m := map[string]*podState{}
		for _, p := range ps {
			m[p.uid] = p
		}
		return m
	}
	for _, tc := range []struct {
		name    string
		desired *desiredPod
		actual  map[string]*podState
		want    []string
	}{
		{
			name:    "new pod: sandbox then containers in order",
			desired: desired("u1", v1.RestartPolicyAlways, nil, "a", "b"),
			want:    []string{"sandbox u1", "start u1/a#0", "start u1/b#0"},
		},
		{
			name:    "all running: nothing to do",
			desired: desired("u1", v1.RestartPolicyAlways, nil, "a"),
			actual:  pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{running("u1", "a", "c1", 0)}}),
		},
		{
			name:   "removed: stop, destroy, teardown",
			actual: pods(&podState{uid: "u1", sandbox: true, grace: 7e9, containers: []podspec.ContainerStatus{running("u1", "a", "c1", 0), exited("u1", "b", "c2", 0, 0)}}),
			want:   []string{"kill c1 7s", "destroy c1", "destroy c2", "teardown u1"},
		},
		{
			name: "removed adopted pod: the grace its containers were started with",
			actual: pods(&podState{uid: "u1", containers: []podspec.ContainerStatus{
				withGrace(running("u1", "a", "c1", 0), 300e9), withGrace(running("u1", "b", "c2", 0), 0),
			}}),
			want: []string{"kill c1 5m0s", "kill c2 5m0s", "destroy c1", "destroy c2", "teardown u1"},
		},
		{
			name:   "removed adopted pod of unknown grace: default 30s",
			actual: pods(&podState{uid: "u1", containers: []podspec.ContainerStatus{running("u1", "a", "c1", 0)}}),
			want:   []string{"kill c1 30s", "destroy c1", "teardown u1"},
		},
		{
			name:    "edited: old generation removed before the new one starts",
			desired: desired("u2", v1.RestartPolicyAlways, nil, "a"),
			actual:  pods(&podState{uid: "u1", sandbox: true, grace: 5e9, containers: []podspec.ContainerStatus{running("u1", "a", "c1", 0)}}),
			want:    []string{"kill c1 5s", "destroy c1", "teardown u1", "sandbox u2", "start u2/a#0"},
		},
		{
			name:    "Always restarts a success",
			desired: desired("u1", v1.RestartPolicyAlways, nil, "a"),
			actual:  pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{exited("u1", "a", "c1", 2, 0)}}),
			want:    []string{"start u1/a#3 after c1"},
		},
		{
			name:    "OnFailure restarts a failure",
			desired: desired("u1", v1.RestartPolicyOnFailure, nil, "a", "b"),
			actual:  pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{exited("u1", "a", "c1", 0, 0), exited("u1", "b", "c2", 0, 1)}}),
			want:    []string{"start u1/b#1 after c2"},
		},
		{
			name:    "Never restarts nothing",
			desired: desired("u1", v1.RestartPolicyNever, nil, "a"),
			actual:  pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{exited("u1", "a", "c1", 0, 1)}}),
		},
		{
			name:    "older instances and unknown containers are removed",
			desired: desired("u1", v1.RestartPolicyAlways, nil, "a"),
			actual: pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{
				exited("u1", "a", "c1", 0, 1), running("u1", "a", "c2", 1), running("u1", "gone", "c3", 0),
			}}),
			want: []string{"destroy c1", "kill c3 5s", "destroy c3"},
		},
		{
			name:    "changed hash under the same UID restarts",
			desired: desired("u1", v1.RestartPolicyNever, nil, "a"),
			actual: pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{
				func() podspec.ContainerStatus { c := running("u1", "a", "c1", 0); c.Hash = "old"; return c }(),
			}}),
			want: []string{"kill c1 5s", "start u1/a#1 after c1"},
		},
		{
			name:    "created but never started: start afresh",
			desired: desired("u1", v1.RestartPolicyAlways, nil, "a"),
			actual: pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{
				func() podspec.ContainerStatus {
					c := running("u1", "a", "c1", 0)
					c.State = podspec.StateCreated
					return c
				}(),
			}}),
			want: []string{"kill c1 5s", "start u1/a#1 after c1"},
		},
		{
			name:    "init containers first, one at a time",
			desired: desired("u1", v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			want:    []string{"sandbox u1", "start u1/i1#0"},
		},
		{
			name:    "running init container: wait",
			desired: desired("u1", v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			actual:  pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{running("u1", "i1", "c1", 0)}}),
		},
		{
			name:    "init done: next init, then regular containers",
			desired: desired("u1", v1.RestartPolicyAlways, []string{"i1", "i2"}, "a"),
			actual: pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{
				exited("u1", "i1", "c1", 0, 0), exited("u1", "i2", "c2", 0, 0),
			}}),
			want: []string{"start u1/a#0"},
		},
		{
			name:    "failed init container restarts unless Never",
			desired: desired("u1", v1.RestartPolicyOnFailure, []string{"i1"}, "a"),
			actual:  pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{exited("u1", "i1", "c1", 0, 1)}}),
			want:    []string{"start u1/i1#1 after c1"},
		},
		{
			name:    "failed init container with Never: pod failed, nothing starts",
			desired: desired("u1", v1.RestartPolicyNever, []string{"i1"}, "a"),
			actual:  pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{exited("u1", "i1", "c1", 0, 1)}}),
		},
		{
			name:    "liveness failed: kill with the pod's grace",
			desired: desired("u1", v1.RestartPolicyAlways, nil, "a", "b"),
			actual: pods(&podState{uid: "u1", sandbox: true, unhealthy: map[string]prober.Kind{"c1": prober.Liveness},
				containers: []podspec.ContainerStatus{running("u1", "a", "c1", 0), running("u1", "b", "c2", 0)}}),
			want: []string{"kill c1 5s"},
		},
		{
			name:    "killed by a probe, exited 0: restarted under OnFailure",
			desired: desired("u1", v1.RestartPolicyOnFailure, nil, "a"),
			actual: pods(&podState{uid: "u1", sandbox: true, unhealthy: map[string]prober.Kind{"c1": prober.Startup},
				containers: []podspec.ContainerStatus{exited("u1", "a", "c1", 0, 0)}}),
			want: []string{"start u1/a#1 after c1"},
		},
		{
			name:    "killed by a probe: not restarted under Never",
			desired: desired("u1", v1.RestartPolicyNever, nil, "a"),
			actual: pods(&podState{uid: "u1", sandbox: true, unhealthy: map[string]prober.Kind{"c1": prober.Liveness},
				containers: []podspec.ContainerStatus{exited("u1", "a", "c1", 0, 137)}}),
		},
		{
			name:    "a postStart hook runs: nothing else starts, restarts neither",
			desired: desired("u1", v1.RestartPolicyAlways, nil, "a", "b", "c"),
			actual: pods(&podState{uid: "u1", sandbox: true, postStarting: true, containers: []podspec.ContainerStatus{
				running("u1", "a", "c1", 0), exited("u1", "c", "c3", 0, 1),
			}}),
		},
		{
			name:    "postStart failed: killed with the pod's grace, not restarted yet",
			desired: desired("u1", v1.RestartPolicyAlways, nil, "a", "b"),
			actual: pods(&podState{uid: "u1", sandbox: true, hookFailed: map[string]bool{"c1": true},
				containers: []podspec.ContainerStatus{running("u1", "a", "c1", 0), running("u1", "b", "c2", 0)}}),
			want: []string{"kill c1 5s"},
		},
		{
			name:    "killed for its postStart, exited 0: not restarted under OnFailure",
			desired: desired("u1", v1.RestartPolicyOnFailure, nil, "a"),
			actual: pods(&podState{uid: "u1", sandbox: true, hookFailed: map[string]bool{"c1": true},
				containers: []podspec.ContainerStatus{exited("u1", "a", "c1", 0, 0)}}),
		},
		{
			name:    "killed for its postStart, exited 143: restarted under OnFailure",
			desired: desired("u1", v1.RestartPolicyOnFailure, nil, "a"),
			actual: pods(&podState{uid: "u1", sandbox: true, hookFailed: map[string]bool{"c1": true},
				containers: []podspec.ContainerStatus{exited("u1", "a", "c1", 0, 143)}}),
			want: []string{"start u1/a#1 after c1"},
		},
		{
			name: "past its deadline: every container stops, sidecars last, nothing starts",
			desired: func() *desiredPod {
				d := desired("u1", v1.RestartPolicyAlways, nil, "a", "b", "c")
				always := v1.ContainerRestartPolicyAlways
				d.pod.Spec.InitContainers = []v1.Container{{Name: "s", Image: "busybox", RestartPolicy: &always}}
				d.hashes["s"] = "h-s"
				d.state, d.stop = podTerminating, &stopRequest{reason: reasonDeadlineExceeded}
				return d
			}(),
			actual: pods(&podState{uid: "u1", sandbox: true, sidecars: []string{"s"}, containers: []podspec.ContainerStatus{
				running("u1", "s", "c0", 0), exited("u1", "a", "c1", 0, 1), running("u1", "b", "c2", 0),
			}}),
			want: []string{"kill c2 5s", "kill c0 5s"},
		},
		{
			name: "evicted: stopped with the grace override, nothing restarts",
			desired: func() *desiredPod {
				d := desired("u1", v1.RestartPolicyAlways, nil, "a", "b")
				d.state, d.stop = podTerminating, &stopRequest{reason: reasonEvicted, grace: 1e9}
				return d
			}(),
			actual: pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{
				running("u1", "a", "c1", 0), exited("u1", "b", "c2", 0, 1),
			}}),
			want: []string{"kill c1 2s"},
		},
		{
			name: "evicted and stopped: what it holds is released",
			desired: func() *desiredPod {
				d := desired("u1", v1.RestartPolicyAlways, nil, "a")
				d.state, d.stop = podTerminated, &stopRequest{reason: reasonEvicted, grace: 30e9}
				return d
			}(),
			actual: pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{exited("u1", "a", "c1", 3, 137)}}),
			want:   []string{"destroy c1", "teardown u1"},
		},
		{
			name: "evicted, its sandbox never made: what the worker holds is released",
			desired: func() *desiredPod {
				d := desired("u1", v1.RestartPolicyAlways, nil, "a")
				d.state, d.stop = podTerminated, &stopRequest{reason: reasonEvicted}
				return d
			}(),
			actual: pods(&podState{uid: "u1"}),
			want:   []string{"teardown u1"},
		},
		{
			name: "evicted and released: nothing to do",
			desired: func() *desiredPod {
				d := desired("u1", v1.RestartPolicyAlways, nil, "a")
				d.state, d.stop = podTerminated, &stopRequest{reason: reasonEvicted}
				return d
			}(),
		},
		{
			name: "past its deadline, reclaim asks: its dead containers are removed, the running one stopped first",
			desired: func() *desiredPod {
				d := desired("u1", v1.RestartPolicyAlways, nil, "a", "b")
				d.state, d.stop = podTerminating, &stopRequest{reason: reasonDeadlineExceeded, grace: 1e9}
				d.reclaim = true
				return d
			}(),
			actual: pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{
				running("u1", "a", "c1", 0), exited("u1", "b", "c2", 0, 1),
			}}),
			want: []string{"kill c1 2s", "destroy c2"},
		},
		{
			name: "finished, reclaim asks: its exited containers are removed",
			desired: func() *desiredPod {
				d := desired("u1", v1.RestartPolicyOnFailure, []string{"i"}, "a", "b")
				d.reclaim = true
				return d
			}(),
			actual: pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{
				exited("u1", "i", "c0", 0, 0), exited("u1", "a", "c1", 0, 0), exited("u1", "b", "c2", 1, 0),
			}}),
			want: []string{"destroy c1", "destroy c2", "destroy c0"},
		},
		{
			name: "finished and removed by reclaim: nothing starts again",
			desired: func() *desiredPod {
				d := desired("u1", v1.RestartPolicyNever, []string{"i"}, "a")
				d.final = map[string]podspec.ContainerStatus{"i": exited("u1", "i", "c0", 0, 0), "a": exited("u1", "a", "c1", 0, 3)}
				return d
			}(),
			actual: pods(&podState{uid: "u1", sandbox: true}),
		},
		{
			name: "running, reclaim asks: nothing is removed",
			desired: func() *desiredPod {
				d := desired("u1", v1.RestartPolicyOnFailure, nil, "a", "b")
				d.reclaim = true
				return d
			}(),
			actual: pods(&podState{uid: "u1", sandbox: true, containers: []podspec.ContainerStatus{
				exited("u1", "a", "c1", 0, 0), running("u1", "b", "c2", 0),
			}}),
		},
		{
			name:    "eviction lifted: the evicted run is removed, the pod starts afresh",
			desired: desired("u1", v1.RestartPolicyNever, []string{"i"}, "a"),
			actual: pods(&podState{uid: "u1", sandbox: true, ended: map[string]bool{"c0": true, "c1": true}, containers: []podspec.ContainerStatus{
				exited("u1", "i", "c0", 0, 0), exited("u1", "a", "c1", 3, 137),
			}}),
			want: []string{"destroy c0", "destroy c1", "start u1/i#0"},
		},
		{
			name: "unresolvable container is not started",
			desired: func() *desiredPod {
				d := desired("u1", v1.RestartPolicyAlways, nil, "a", "b")
				delete(d.hashes, "a")
				return d
			}(),
			want: []string{"sandbox u1", "start u1/b#0"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.actual == nil {
				tc.actual = map[string]*podState{}
			}
			var got []string
			for _, a := range plan(tc.desired, tc.actual) {
				got = append(got, a.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("plan = %q\nwant %q", got, tc.want)
			}
		})
	}
}

// String is for test failures.
func (a action) String() string {
	switch a.kind {
	case actKill:
		return fmt.Sprintf("kill %s %s", a.id, a.grace)
	case actDestroy:
		return "destroy " + a.id
	case actStart:
		s := fmt.Sprintf("start %s/%s#%d", a.podUID, a.container, a.attempt)
		if a.prevID != "" {
			s += " after " + a.prevID
		}
		return s
	}
	return a.kind.String() + " " + a.podUID
}

// The grace period the agent stops a pod with and the one its sandbox
// records come from one minimum: they agree for every request, 0 included
// (a parsed pod always has one: defaulting sets 30).
func TestPodGraceMatchesSandbox(t *testing.T) {
	for _, secs := range []*int64{ptrTo(int64(0)), ptrTo(int64(1)), ptrTo(int64(2)), ptrTo(int64(45))} {
		pod := &v1.Pod{Spec: v1.PodSpec{TerminationGracePeriodSeconds: secs}}
		got, want := podGrace(pod), manifest.Sandbox(pod, manifest.Paths{}).TerminationGracePeriod
		if got != want {
			t.Errorf("terminationGracePeriodSeconds %v: agent stops with %v, sandbox records %v", *secs, got, want)
		}
		if got < manifest.MinimumGracePeriod {
			t.Errorf("terminationGracePeriodSeconds %v: grace %v below the minimum", *secs, got)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
