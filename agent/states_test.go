package agent

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// The desired generation syncs, terminates when told to stop (here by an
// eviction), is terminated once nothing of it runs, and records when each
// happened, as the kubelet's podSyncStatus; the eviction lifted starts a
// new generation, syncing. The worker is synced by hand, so that its state
// can be read between syncs.
func TestWorkerStates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		a := New(Config{NodeName: testNode}, rt, slog.New(slog.NewTextHandler(io.Discard, nil)))
		a.conv = &fakeConv{rt: rt}
		w := newWorker(a, "default/hog-"+testNode, map[string]*podState{})
		ctx, cancel := context.WithCancel(t.Context())
		defer func() {
			cancel()
			w.waiters.Wait()
		}()
		pod := testPod("hog", "u1", v1.RestartPolicyAlways, ctr("leak", "busybox"))

		t0 := time.Now()
		w.update(pod.Pod, 1)
		w.sync(ctx)
		if g := w.gen; g.state() != podSyncing || !g.syncedAt.Equal(t0) || !g.terminatingAt.IsZero() || !g.terminatedAt.IsZero() {
			t.Fatalf("started: %s, synced %v terminating %v terminated %v", g.state(), g.syncedAt, g.terminatingAt, g.terminatedAt)
		}
		if got := rt.Running(); len(got) != 1 {
			t.Fatalf("running %q, want the pod's container", got)
		}

		time.Sleep(time.Minute)
		t1 := time.Now()
		w.setEviction("u1", &stopRequest{reason: reasonEvicted, message: "low on memory"})
		w.sync(ctx)
		if g := w.gen; g.state() != podTerminating || !g.terminatingAt.Equal(t1) || g.stop.reason != reasonEvicted {
			t.Fatalf("evicted: %s, terminating %v, stop %+v", g.state(), g.terminatingAt, g.stop)
		}
		if got := rt.Running(); len(got) != 0 {
			t.Fatalf("running %q once evicted", got)
		}

		time.Sleep(time.Second)
		t2 := time.Now()
		w.sync(ctx)
		if g := w.gen; g.state() != podTerminated || !g.terminatedAt.Equal(t2) || !g.terminatingAt.Equal(t1) {
			t.Fatalf("stopped: %s, terminating %v terminated %v", g.state(), g.terminatingAt, g.terminatedAt)
		}
		if n := rt.Len(); n != 0 {
			t.Errorf("runtime holds %d, want what the evicted pod held released", n)
		}
		if p := w.a.statuses.Desired(w.key); p.Status.Phase != v1.PodFailed || p.Status.Reason != reasonEvicted {
			t.Errorf("evicted pod: %s %q, want Failed Evicted", p.Status.Phase, p.Status.Reason)
		}

		time.Sleep(time.Minute)
		t3 := time.Now()
		w.setEviction("", nil)
		w.sync(ctx)
		if g := w.gen; g.state() != podSyncing || !g.syncedAt.Equal(t3) || g.stop != nil || !g.terminatingAt.IsZero() {
			t.Fatalf("eviction lifted: %s, synced %v, terminating %v, stop %+v", g.state(), g.syncedAt, g.terminatingAt, g.stop)
		}
		if got := rt.Running(); len(got) != 1 {
			t.Errorf("running %q once the eviction is lifted, want the pod's container again", got)
		}
	})
}

// A generation told to stop keeps the first reason: a deadline passing
// after an eviction does not make it terminate again.
func TestGenerationTerminateOnce(t *testing.T) {
	var g generation
	t0 := time.Unix(100, 0)
	if !g.terminate(&stopRequest{reason: reasonEvicted}, t0) || g.state() != podTerminating {
		t.Fatalf("first stop: %s", g.state())
	}
	if g.terminate(&stopRequest{reason: reasonDeadlineExceeded}, t0.Add(time.Second)) {
		t.Error("a second stop was taken")
	}
	if g.stop.reason != reasonEvicted || !g.terminatingAt.Equal(t0) {
		t.Errorf("stop %+v at %v, want the eviction at %v", g.stop, g.terminatingAt, t0)
	}
}

// A pod told to stop is terminating while the newest instance of any of its
// containers runs, and terminated once none does; a container of an ended
// run, or one reclaim removed, does not count.
func TestDesiredPodState(t *testing.T) {
	pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"), ctr("b", "busybox")).Pod
	run := func(name, id string, attempt int, state podspec.State) podspec.ContainerStatus {
		return podspec.ContainerStatus{ID: id, PodUID: "u1", Name: name, Attempt: attempt, State: state}
	}
	stop := &stopRequest{reason: reasonEvicted}
	for _, tc := range []struct {
		name string
		d    desiredPod
		st   *podState
		want podWorkState
	}{
		{"running, not told to stop", desiredPod{pod: pod},
			&podState{uid: "u1", containers: []podspec.ContainerStatus{run("a", "c1", 0, podspec.StateRunning)}}, podSyncing},
		{"told to stop, nothing yet", desiredPod{pod: pod, stop: stop}, nil, podTerminated},
		{"told to stop, one runs", desiredPod{pod: pod, stop: stop},
			&podState{uid: "u1", containers: []podspec.ContainerStatus{
				run("a", "c1", 0, podspec.StateExited), run("b", "c2", 0, podspec.StateRunning)}}, podTerminating},
		{"told to stop, one made and never started", desiredPod{pod: pod, stop: stop},
			&podState{uid: "u1", containers: []podspec.ContainerStatus{run("a", "c1", 0, podspec.StateCreated)}}, podTerminating},
		{"told to stop, all exited", desiredPod{pod: pod, stop: stop},
			&podState{uid: "u1", containers: []podspec.ContainerStatus{
				run("a", "c1", 0, podspec.StateExited), run("b", "c2", 0, podspec.StateExited)}}, podTerminated},
		{"told to stop, only a discarded run's container runs", desiredPod{pod: pod, stop: stop},
			&podState{uid: "u1", ended: map[string]bool{"c1": true}, containers: []podspec.ContainerStatus{run("a", "c1", 0, podspec.StateRunning)}}, podTerminated},
		{"told to stop, its containers removed by reclaim", desiredPod{pod: pod, stop: stop,
			final: map[string]podspec.ContainerStatus{"a": run("a", "c1", 0, podspec.StateExited)}},
			&podState{uid: "u1", sandbox: true}, podTerminated},
	} {
		// The worker records the stop, then settles the generation by
		// what it has of the pod.
		var g generation
		if tc.d.stop != nil {
			g.terminate(tc.d.stop, time.Unix(100, 0))
		}
		g.settle(&tc.d, tc.st, time.Unix(101, 0))
		if got := g.state(); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
