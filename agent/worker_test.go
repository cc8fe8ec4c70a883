package agent

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestStartRunsPodAndReportsRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{WatchdogPeriod: 5 * time.Second})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"), ctr("b", "busybox"))})

		want := []string{"sandbox u1", "volumes u1", "start u1/a#0", "start u1/b#0"}
		if got := rt.Calls(); !slices.Equal(got, want) {
			t.Fatalf("calls = %q, want %q", got, want)
		}
		p := h.pod("web")
		if p.Status.Phase != v1.PodRunning {
			t.Errorf("phase = %s, want Running", p.Status.Phase)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Running == nil || !cs.Ready || !strings.HasPrefix(cs.ContainerID, "staticpodd://c") {
				t.Errorf("container %s status = %+v, want running, ready, with an ID", cs.Name, cs)
			}
		}
		ready, statuses, watchdogs := h.n.snapshot()
		if ready != 1 {
			t.Errorf("Ready called %d times, want 1", ready)
		}
		if len(statuses) == 0 || statuses[len(statuses)-1] != "1 pod: 1 running" {
			t.Errorf("statuses = %q, want the last to be %q", statuses, "1 pod: 1 running")
		}
		if watchdogs == 0 {
			t.Error("watchdog never pinged")
		}
		time.Sleep(time.Minute)
		if _, _, w := h.n.snapshot(); w < watchdogs+10 {
			t.Errorf("watchdog pinged %d times in a quiet minute, want at least 10 (every 5s)", w-watchdogs)
		}
	})
}

// Without a systemd watchdog, an idle reconcile loop wakes for the sync
// period only: each pass pings the (absent) watchdog, so the pings count
// the passes.
func TestIdleLoopWakesOnlyToSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		if p := h.pod("web"); p.Status.Phase != v1.PodRunning {
			t.Fatalf("phase = %s, want Running", p.Status.Phase)
		}
		_, _, before := h.n.snapshot()
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		if _, _, w := h.n.snapshot(); w-before > 5 {
			t.Errorf("the reconcile loop ran %d times in 5 quiet minutes, want at most 5 (syncFrequency 1m)", w-before)
		}
	})
}

func TestReadyWaitsForEverySource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{Sources: []string{manifest.SourceFile, manifest.SourceHTTP}})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		if r, _, _ := h.n.snapshot(); r != 0 {
			t.Fatal("Ready before the http source delivered anything")
		}
		h.updates <- sourceUpdate(manifest.SourceHTTP)
		synctest.Wait()
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		if r, _, _ := h.n.snapshot(); r != 1 {
			t.Fatalf("Ready called %d times after both sources, want exactly 1", r)
		}
	})
}

func TestEditStopsOldGenerationBeforeStartingNew(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.stubborn["a"] = true // ignores SIGTERM: the new pod must wait out the grace period
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		t0 := time.Now()
		h.updates <- sourceUpdate(manifest.SourceFile, testPod("web", "u2", v1.RestartPolicyAlways, ctr("a", "busybox", "sleep", "9")))
		synctest.Wait()
		if got := rt.Calls("start u2"); len(got) != 0 {
			t.Fatalf("new generation started while the old one is in its grace period: %q", got)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		want := []string{
			"sandbox u1", "volumes u1", "start u1/a#0",
			"signal c1 terminated", "signal c1 killed", "destroy c1", "rmsandbox u1", "rmvolumes u1", "rmlogs u1",
			"sandbox u2", "volumes u2", "start u2/a#0",
		}
		if got := rt.Calls(); !slices.Equal(got, want) {
			t.Fatalf("calls = %q\nwant %q", got, want)
		}
		if rt.Starts()[1].Sub(t0) != 5*time.Second {
			t.Errorf("new generation started %v after the edit, want the 5s grace period", rt.Starts()[1].Sub(t0))
		}
		if p := h.pod("web"); p.UID != "u2" || p.Status.Phase != v1.PodRunning {
			t.Errorf("pod = %s %s, want u2 Running", p.UID, p.Status.Phase)
		}
	})
}

// Edits that come while an old generation is being stopped never start a
// generation that is already stale: only the newest runs next.
func TestFastEditsSkipStaleGenerations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.stubborn["a"] = true
		paths := manifest.Paths{RootDir: t.TempDir()}
		h := start(t, rt, Config{Seen: NewSeenStore(paths)})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		h.updates <- sourceUpdate(manifest.SourceFile, testPod("web", "u2", v1.RestartPolicyAlways, ctr("a", "busybox", "sleep", "2")))
		time.Sleep(time.Second)
		h.updates <- sourceUpdate(manifest.SourceFile, testPod("web", "u3", v1.RestartPolicyAlways, ctr("a", "busybox", "sleep", "3")))
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got := rt.Calls("sandbox u2", "start u2"); len(got) != 0 {
			t.Errorf("a stale generation was started: %q", got)
		}
		if got := rt.Calls("start u3"); len(got) != 1 {
			t.Errorf("calls = %q, want the newest generation started once", rt.Calls())
		}
		if p := h.pod("web"); p.UID != "u3" || p.Status.Phase != v1.PodRunning {
			t.Errorf("pod = %s %s, want u3 Running", p.UID, p.Status.Phase)
		}
		// Only generations that were started have a pod directory (u1's goes
		// with RemoveVolumes, which the fake only records).
		if _, err := os.Stat(poddir.Root(paths.RootDir).Pod("u2")); !os.IsNotExist(err) {
			t.Errorf("the stale generation left %s (err %v)", poddir.Root(paths.RootDir).Pod("u2"), err)
		}
		if _, err := os.Stat(filepath.Join(poddir.Root(paths.RootDir).Pod("u3"), "seen")); err != nil {
			t.Errorf("the running generation's config.seen is not recorded: %v", err)
		}
	})
}

func TestDeleteCleansEverything(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"), ctr("b", "busybox"))})
		h.send(nil)
		want := []string{"signal c1 terminated", "signal c2 terminated", "destroy c1", "destroy c2", "rmsandbox u1", "rmvolumes u1", "rmlogs u1"}
		got := rt.Calls("signal", "destroy", "rm")
		slices.Sort(got[:2]) // both stopped side by side, in any order
		if !slices.Equal(got, want) {
			t.Fatalf("calls = %q, want %q", got, want)
		}
		if n := rt.Len(); n != 0 {
			t.Errorf("runtime still has %d containers and sandboxes", n)
		}
		if pods := h.a.Pods(); len(pods) != 0 {
			t.Errorf("Pods() = %d pods after removal, want none", len(pods))
		}
		if s := h.a.Summary(); s != "0 pods" {
			t.Errorf("Summary() = %q, want %q", s, "0 pods")
		}
	})
}

func TestCrashLoopBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["a"] = 1
		h := start(t, rt, Config{})
		t0 := time.Now()
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})

		p := h.pod("web")
		cs := p.Status.ContainerStatuses[0]
		if w := cs.State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" ||
			w.Message != "back-off 10s restarting failed container=a pod=web-node1_default(u1)" {
			t.Fatalf("state = %+v, want waiting CrashLoopBackOff with a 10s back-off", cs.State)
		}
		if cs.RestartCount != 1 || cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1 {
			t.Errorf("restartCount %d lastState %+v, want 1 and exit code 1", cs.RestartCount, cs.LastTerminationState)
		}
		if s := h.a.Summary(); s != "1 pod: 1 waiting (web: CrashLoopBackOff)" {
			t.Errorf("Summary() = %q", s)
		}

		time.Sleep(11 * time.Minute)
		var delays []time.Duration
		for _, s := range rt.Starts() {
			delays = append(delays, s.Sub(t0))
			t0 = s
		}
		// First restart at once, then 10s, 20s, 40s... capped at 5m.
		want := []time.Duration{0, 0, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second, 160 * time.Second, 300 * time.Second}
		if !slices.Equal(delays[:min(len(delays), len(want))], want) {
			t.Errorf("delays between starts = %v, want %v", delays, want)
		}
	})
}

func TestBackOffResetsAfterTenMinutesRunning(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		rt.Exit("c1", 1)
		synctest.Wait() // restarted at once as c2
		rt.Exit("c2", 1)
		synctest.Wait() // waits 10s
		time.Sleep(10 * time.Second)
		synctest.Wait() // c3 runs; a second quick exit would wait 20s
		time.Sleep(11 * time.Minute)
		rt.Exit("c3", 1)
		synctest.Wait()
		if got := rt.Calls("start"); len(got) != 4 {
			t.Fatalf("starts = %q, want the 4th at once after 11 minutes of running", got)
		}
	})
}

func TestRestartPolicies(t *testing.T) {
	for _, tc := range []struct {
		policy   v1.RestartPolicy
		exit     int
		restarts bool
		phase    v1.PodPhase
	}{
		{v1.RestartPolicyAlways, 0, true, v1.PodRunning},
		{v1.RestartPolicyOnFailure, 0, false, v1.PodSucceeded},
		{v1.RestartPolicyOnFailure, 2, true, v1.PodRunning},
		{v1.RestartPolicyNever, 2, false, v1.PodFailed},
		{v1.RestartPolicyNever, 0, false, v1.PodSucceeded},
	} {
		t.Run(string(tc.policy)+"/"+string(rune('0'+tc.exit)), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rt := newFakeRuntime()
				h := start(t, rt, Config{})
				h.send([]manifest.Pod{testPod("job", "u1", tc.policy, ctr("a", "busybox"))})
				rt.Exit("c1", tc.exit)
				synctest.Wait()
				if got := len(rt.Calls("start")) == 2; got != tc.restarts {
					t.Errorf("restarted = %v, want %v", got, tc.restarts)
				}
				if p := h.pod("job"); p.Status.Phase != tc.phase {
					t.Errorf("phase = %s, want %s", p.Status.Phase, tc.phase)
				}
			})
		})
	}
}

func TestAdoptionDoesNotRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		started := time.Now().Add(-time.Hour)
		rt.adopt(podspec.ContainerStatus{ID: "old-a", PodUID: "u1", PodName: "web-node1", Name: "a", Attempt: 3,
			Hash: hashOf(&pod.Spec.Containers[0]), Image: "busybox", State: podspec.StateRunning, StartedAt: started, CreatedAt: started})
		rt.adopt(podspec.ContainerStatus{ID: "gone", PodUID: "u0", PodName: "gone-node1", Name: "x", State: podspec.StateRunning})
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{pod})

		if got := rt.Calls("start", "signal c", "signal old"); len(got) != 0 {
			t.Fatalf("adopted container touched: %q", got)
		}
		cs := h.pod("web").Status.ContainerStatuses[0]
		if cs.State.Running == nil || cs.RestartCount != 3 || cs.ContainerID != "staticpodd://old-a" {
			t.Fatalf("status = %+v, want the adopted container running with restartCount 3", cs)
		}
		if st := h.pod("web").Status.StartTime; st == nil || !st.Time.Equal(started) {
			t.Errorf("startTime = %v, want the adopted container's %v", st, started)
		}
		// The pod nobody wants is gone.
		if got := rt.Calls("signal gone", "destroy gone", "rmsandbox u0"); len(got) != 3 {
			t.Errorf("orphan cleanup calls = %q", got)
		}
		// An adopted container's exit is noticed and it restarts as attempt 4.
		rt.Exit("old-a", 1)
		synctest.Wait()
		if got := rt.Calls("start"); !slices.Equal(got, []string{"start u1/a#4"}) {
			t.Errorf("starts after the adopted container exited = %q", got)
		}
	})
}

func TestAdoptionStopsOldGenerationEditedWhileDown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.adopt(podspec.ContainerStatus{ID: "old", PodUID: "u1", PodName: "web-node1", PodNamespace: "default", Name: "a", State: podspec.StateRunning})
		h := start(t, rt, Config{Sources: []string{manifest.SourceFile, manifest.SourceHTTP}})
		h.send([]manifest.Pod{testPod("web", "u2", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		want := []string{"signal old terminated", "destroy old", "rmsandbox u1", "rmvolumes u1", "rmlogs u1", "sandbox u2", "volumes u2", "start u2/a#0"}
		if got := rt.Calls(); !slices.Equal(got, want) {
			t.Fatalf("calls = %q, want %q", got, want)
		}
	})
}

func TestProblemKeepsLastGoodPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		h.send([]manifest.Pod{pod})
		h.send([]manifest.Pod{pod}, manifest.Problem{Origin: pod.Origin, Err: errString("line 3: mapping values are not allowed")})
		if got := rt.Calls("signal", "start"); len(got) != 1 {
			t.Errorf("calls = %q, want the pod untouched", got)
		}
		if ps := h.a.Problems(); len(ps) != 1 || ps[0].Origin != pod.Origin {
			t.Errorf("Problems() = %v", ps)
		}
		if s := h.a.Summary(); s != "1 pod: 1 running; 1 manifest problem" {
			t.Errorf("Summary() = %q", s)
		}
	})
}

func TestInitContainersRunInOrderFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.crash["init1"] = 0
		rt.crash["init2"] = 0
		h := start(t, rt, Config{})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		pod.Spec.InitContainers = []v1.Container{ctr("init1", "busybox"), ctr("init2", "busybox")}
		h.send([]manifest.Pod{pod})
		want := []string{"start u1/init1#0", "start u1/init2#0", "start u1/a#0"}
		if got := rt.Calls("start"); !slices.Equal(got, want) {
			t.Fatalf("starts = %q, want %q", got, want)
		}
		p := h.pod("web")
		if p.Status.Phase != v1.PodRunning || p.Status.InitContainerStatuses[1].State.Terminated == nil {
			t.Errorf("phase %s, init statuses %+v", p.Status.Phase, p.Status.InitContainerStatuses)
		}
	})
}

func TestConfigErrorIsWaitingReason(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.a.conv = &fakeConv{rt: rt, fail: map[string]error{"a": errString(`env "X": bad $(ref`)}}
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		cs := h.pod("web").Status.ContainerStatuses[0]
		if w := cs.State.Waiting; w == nil || w.Reason != "CreateContainerConfigError" {
			t.Fatalf("state = %+v, want CreateContainerConfigError", cs.State)
		}
	})
}

type errString string

func (e errString) Error() string { return string(e) }

func TestVanishedContainerIsRestarted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		rt.adopt(podspec.ContainerStatus{ID: "old", PodUID: "u1", PodName: "web-node1", Name: "a", Attempt: 2,
			Hash: hashOf(&pod.Spec.Containers[0]), State: podspec.StateRunning})
		rt.vanished["old"] = true // its state is gone: Wait says it does not exist
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{pod})
		if got := rt.Calls("start"); !slices.Equal(got, []string{"start u1/a#3"}) {
			t.Fatalf("starts = %q, want the vanished container replaced", got)
		}
		last := h.pod("web").Status.ContainerStatuses[0].LastTerminationState.Terminated
		if last == nil || last.Reason != "ContainerStatusUnknown" || last.ExitCode != 137 {
			t.Errorf("lastState = %+v, want ContainerStatusUnknown 137", last)
		}
	})
}

// A start that fails and leaves no container waits with the kubelet's reason
// for the step that failed, and is retried with back-off.
func TestStartErrorRetriedWithBackOff(t *testing.T) {
	for _, tc := range []struct {
		err    error
		reason string
	}{
		{errString("prepare rootfs: mount overlay: no space left on device"), "CreateContainerError"},
		{fmt.Errorf("monitor of container c1: %w: start timed out", podspec.ErrStartFailed), "RunContainerError"},
	} {
		t.Run(tc.reason, func(t *testing.T) { testStartErrorRetriedWithBackOff(t, tc.err, tc.reason) })
	}
}

func testStartErrorRetriedWithBackOff(t *testing.T, startErr error, reason string) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.startErr = startErr
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		cs := h.pod("web").Status.ContainerStatuses[0]
		if w := cs.State.Waiting; w == nil || w.Reason != reason || w.Message != startErr.Error() {
			t.Fatalf("state = %+v, want %s with the cause", cs.State, reason)
		}
		time.Sleep(35 * time.Second)
		// Tries at 0s, 10s, 30s, then waits 40s.
		if got := len(rt.Calls("start-failed")); got != 3 {
			t.Errorf("%d failed starts in 35s, want 3", got)
		}
		rt.mu.Lock()
		rt.startErr = nil
		rt.mu.Unlock()
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if len(rt.Running()) != 0 {
			t.Error("retried before the back-off ended")
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if len(rt.Running()) != 1 {
			t.Errorf("not running once starts succeed; calls %q", rt.Calls())
		}
	})
}

// A pod an earlier daemon ran and no manifest wants any more is listed as
// Terminating, with what its labels tell, until it is gone.
func TestOrphanListedAsTerminatingUntilGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.stubborn["x"] = true // waits out its grace period
		rt.adopt(podspec.ContainerStatus{ID: "gone", PodUID: "u0", PodName: "gone-" + testNode, PodNamespace: "kube-system",
			Name: "x", Image: "busybox", State: podspec.StateRunning, TerminationGracePeriod: 5 * time.Second})
		h := start(t, rt, Config{})
		h.send(nil)
		p := h.pod("gone")
		if p.DeletionTimestamp == nil || p.Namespace != "kube-system" || p.UID != "u0" || *p.DeletionGracePeriodSeconds != 5 ||
			len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			t.Fatalf("orphan while it stops = %+v", p)
		}
		time.Sleep(6 * time.Second)
		synctest.Wait()
		for _, p := range h.a.Pods() {
			t.Errorf("pod %s still listed after its removal", p.Name)
		}
	})
}

// A pod's containers are stopped side by side: two that ignore SIGTERM are
// both killed one grace period after the stop began, not one after another.
func TestStopIsParallel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.stubborn["a"], rt.stubborn["b"] = true, true
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"), ctr("b", "busybox"))})
		h.send(nil)
		time.Sleep(4900 * time.Millisecond)
		synctest.Wait()
		if got := rt.Calls("signal"); len(got) != 2 {
			t.Fatalf("signals before the grace period ended: %q, want two SIGTERMs; all calls %q", got, rt.Calls())
		}
		time.Sleep(200 * time.Millisecond)
		synctest.Wait()
		if got := rt.Calls("signal"); len(got) != 4 || !strings.HasSuffix(got[2], "killed") || !strings.HasSuffix(got[3], "killed") {
			t.Errorf("signals after the grace period: %q, want both SIGKILLed at once", got)
		}
		if n := rt.Len(); n != 0 {
			t.Errorf("runtime still has %d containers and sandboxes", n)
		}
	})
}

// Leftover pod directories are swept once, when every source has delivered
// its first snapshot and before any worker acts on it, keeping every UID found
// at start, listed by a source, or handed to a worker before.
func TestLeftoversSweptOnceEverySourceSpoke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.adopt(podspec.ContainerStatus{ID: "old", PodUID: "u9", PodName: "web-node1", Name: "a", State: podspec.StateRunning})
		rt.adopt(podspec.ContainerStatus{ID: "gone", PodUID: "u0", PodName: "gone-node1", Name: "x", State: podspec.StateRunning})
		h := start(t, rt, Config{Sources: []string{manifest.SourceFile, manifest.SourceHTTP}})
		conv := h.a.conv.(*fakeConv)
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		h.send([]manifest.Pod{testPod("web", "u2", v1.RestartPolicyAlways, ctr("a", "busybox", "sleep", "2"))})
		if got := conv.Sweeps(); len(got) != 0 {
			t.Fatalf("swept %q before every source had spoken", got)
		}
		h.updates <- sourceUpdate(manifest.SourceHTTP, testPod("api", "u3", v1.RestartPolicyAlways, ctr("a", "busybox")))
		synctest.Wait()
		if got, want := conv.Sweeps(), []string{"u0,u1,u2,u3,u9"}; !slices.Equal(got, want) {
			t.Fatalf("sweeps kept %q, want %q", got, want)
		}
		calls := rt.Calls()
		if i := slices.Index(calls, "sandbox u3"); i < conv.callsAtSweep {
			t.Errorf("the pod of the last snapshot was acted on (%q) before the sweep", calls[:conv.callsAtSweep])
		}
		h.send(nil)
		if got := conv.Sweeps(); len(got) != 1 {
			t.Errorf("swept again: %q", got)
		}
	})
}

// A pod that follows its tags runs the generation of the digest its tag
// moved to, not its manifest's UID: the sweep at start keeps the generation
// that runs, and not the manifest's UID, whose log directory an earlier
// daemon killed while tearing that generation down would leave for good.
func TestLeftoversSweptKeepTheFollowedGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := t.TempDir()
		f := loadFollows(root, slog.New(slog.NewTextHandler(io.Discard, nil)))
		f.at["default/web-node1"] = &followed{Base: map[string]string{"a": "reg.example/app@sha256:" + strings.Repeat("a", 64)},
			Now: map[string]string{"a": "reg.example/app@sha256:" + strings.Repeat("b", 64)}, Tag: map[string]string{"a": "reg.example/app:v1"}}
		if err := f.saveLocked(); err != nil {
			t.Fatal(err)
		}
		rt := newFakeRuntime()
		h := start(t, rt, Config{Paths: manifest.Paths{RootDir: root}})
		conv := h.a.conv.(*fakeConv)
		p := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "reg.example/app:v1", "sleep"))
		p.Pod.Annotations = map[string]string{manifest.AnnotationFollowTags: "1h"}
		h.send([]manifest.Pod{p})
		gen := h.pod("web").UID
		if gen == "u1" {
			t.Fatal("the pod runs its manifest's UID, not the followed digest's generation")
		}
		if got, want := conv.Sweeps(), []string{string(gen)}; !slices.Equal(got, want) {
			t.Fatalf("the sweep kept %q, want %q", got, want)
		}
	})
}

// A container whose process cannot be started is, as with the kubelet on
// containerd, a container that exited with exit code 128 and reason
// StartError: it is restarted per restartPolicy with the crash-loop back-off
// (at once, then after 10s, 20s), waits CrashLoopBackOff meanwhile with the
// failure as lastState, and its restart count grows; the failed instance goes
// when the next one is made. Under restartPolicy Never it stays terminated.
func TestStartErrorIsAnExitedContainer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		const why = `exec: "/nope": stat /nope: no such file or directory`
		rt.execFail["a"] = why
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox", "/nope"))})
		if got, want := rt.Calls("start"), []string{"start-exec-failed u1/a#0", "start-exec-failed u1/a#1"}; !slices.Equal(got, want) {
			t.Fatalf("starts = %q, want %q: the first restart at once", got, want)
		}
		p := h.pod("web")
		cs := p.Status.ContainerStatuses[0]
		last := cs.LastTerminationState.Terminated
		if w := cs.State.Waiting; w == nil || w.Reason != "CrashLoopBackOff" {
			t.Errorf("state = %+v, want waiting CrashLoopBackOff", cs.State)
		}
		if last == nil || last.Reason != "StartError" || last.ExitCode != 128 || last.Message != why || !last.StartedAt.IsZero() {
			t.Errorf("lastState = %+v, want StartError 128 with the cause, never started", last)
		}
		if cs.RestartCount != 1 || p.Status.Phase != v1.PodRunning {
			t.Errorf("restartCount %d, phase %s; want 1, Running (as the kubelet's getPhase)", cs.RestartCount, p.Status.Phase)
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		time.Sleep(20 * time.Second)
		synctest.Wait()
		if got := len(rt.Calls("start-exec-failed")); got != 4 {
			t.Errorf("%d failed starts after 30s, want 4 (at 0s, 0s, 10s, 30s)", got)
		}
		if got := rt.Calls("destroy"); !slices.Equal(got, []string{"destroy c1", "destroy c2", "destroy c3"}) {
			t.Errorf("destroys = %q, want each failed instance removed when the next is made", got)
		}

		rt.mu.Lock()
		rt.execFail["n"] = why
		rt.mu.Unlock()
		h.send([]manifest.Pod{testPod("once", "u2", v1.RestartPolicyNever, ctr("n", "busybox", "/nope"))})
		p = h.pod("once")
		cs = p.Status.ContainerStatuses[0]
		if tm := cs.State.Terminated; tm == nil || tm.Reason != "StartError" || tm.ExitCode != 128 || tm.Message != why {
			t.Errorf("restartPolicy Never: state = %+v, want terminated StartError 128", cs.State)
		}
		if got := len(rt.Calls("start-exec-failed u2")); got != 1 || p.Status.Phase != v1.PodFailed {
			t.Errorf("restartPolicy Never: %d starts, phase %s; want 1, Failed", got, p.Status.Phase)
		}
	})
}

// A generation an earlier daemon was stopping when it was killed, whose
// manifest was absent at this daemon's first look and then came back edited,
// is stopped before the new generation starts: the adopted pod is stopped by
// the worker of its recorded name, which the new manifest reaches too.
func TestAdoptedGenerationStopsBeforeNewAfterRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.stubborn["a"] = true // waits out its grace period
		rt.adopt(podspec.ContainerStatus{ID: "old", PodUID: "u0", PodName: "churn1-" + testNode, PodNamespace: "default",
			Name: "a", Image: "busybox", State: podspec.StateRunning, TerminationGracePeriod: 5 * time.Second})
		h := start(t, rt, Config{})
		h.send(nil) // the manifest is missing for a moment: the old generation is to go
		time.Sleep(time.Second)
		synctest.Wait()
		h.send([]manifest.Pod{testPod("churn1", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if starts := rt.Starts(); len(starts) != 0 {
			t.Fatalf("new generation started while the old one still runs: calls %q", rt.Calls())
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := rt.Running(); len(got) != 1 {
			t.Fatalf("running after the old generation's grace period: %q, want the new generation only; calls %q", got, rt.Calls())
		}
		killed, started := rt.When("signal old killed"), rt.Starts()
		if len(started) != 1 || started[0].Before(killed) {
			t.Errorf("new generation started at %v, old one signalled at %v; calls %q", started, killed, rt.Calls())
		}
		if p := h.pod("churn1"); p.UID != "u1" {
			t.Errorf("pod churn1 has UID %s, want the new generation u1", p.UID)
		}
	})
}

// A manifest removed and written again at once (manifest.Pod.Recreated grows)
// stops the pod and starts it again, same UID, as the kubelet does for a
// REMOVE then ADD of one UID: each container's next attempt, restartCount 1,
// and the pod never shows Failed on the way. The same token again changes
// nothing.
func TestRecreatedManifestRestartsPod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"), ctr("b", "busybox"))
		h.send([]manifest.Pod{pod})
		kinds := []string{"signal", "start", "rm"}
		before := len(rt.Calls(kinds...))

		pod.Recreated = 1
		h.send([]manifest.Pod{pod})
		got := rt.Calls(kinds...)[before:]
		// Both stopped side by side, in any order; the old instances are
		// destroyed once the new ones started, as for any restart.
		slices.Sort(got[:2])
		want := []string{"signal c1 terminated", "signal c2 terminated", "start u1/a#1", "start u1/b#1"}
		if !slices.Equal(got, want) {
			t.Fatalf("calls = %q, want %q", got, want)
		}
		p := h.pod("web")
		if p.UID != "u1" || p.Status.Phase != v1.PodRunning || p.Status.Reason != "" {
			t.Errorf("pod %s phase %s reason %q, want u1 Running with no reason", p.UID, p.Status.Phase, p.Status.Reason)
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount != 1 || cs.State.Running == nil {
				t.Errorf("container %s restartCount %d state %+v, want 1 and running", cs.Name, cs.RestartCount, cs.State)
			}
		}

		before = len(rt.Calls(kinds...))
		h.send([]manifest.Pod{pod})
		if got := rt.Calls(kinds...)[before:]; len(got) != 0 {
			t.Errorf("the same token again: calls %q, want none", got)
		}

		// Written back with new content: an edit, the new generation
		// started once, not stopped again for the token.
		edited := testPod("web", "u2", v1.RestartPolicyAlways, ctr("a", "busybox"), ctr("b", "busybox:1"))
		edited.Recreated = 2
		h.send([]manifest.Pod{edited})
		if got := rt.Calls("start u2"); !slices.Equal(got, []string{"start u2/a#0", "start u2/b#0"}) {
			t.Errorf("the edit's starts %q, want a#0 and b#0 once", got)
		}
	})
}

// A pod removed and back with the same UID within attemptsMemory counts its
// restarts on, as the kubelet's do from the dead containers its GC has not
// removed yet; after that, it starts afresh.
func TestRemovedPodBackCountsRestartsOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		h.send([]manifest.Pod{pod})
		h.send(nil)
		h.send([]manifest.Pod{pod})
		if p := h.pod("web"); p.Status.ContainerStatuses[0].RestartCount != 1 {
			t.Errorf("back at once: restartCount %d, want 1", p.Status.ContainerStatuses[0].RestartCount)
		}
		h.send(nil)
		time.Sleep(attemptsMemory)
		h.send([]manifest.Pod{pod})
		if p := h.pod("web"); p.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("back after %s: restartCount %d, want 0", attemptsMemory, p.Status.ContainerStatuses[0].RestartCount)
		}
		starts := rt.Calls("start")
		want := []string{"start u1/a#0", "start u1/a#1", "start u1/a#0"}
		if !slices.Equal(starts, want) {
			t.Errorf("starts %q, want %q", starts, want)
		}
	})
}

// A restartPolicy Never pod that completed, its dead container removed by
// node-level reclaim, does not run again when the next daemon takes it on
// (a kill -9 in between: nothing but the disk carries over).
func TestReclaimedNeverPodStaysFinishedAcrossRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		cfg := Config{Paths: manifest.Paths{RootDir: t.TempDir()}}
		pod := testPod("job", "u1", v1.RestartPolicyNever, ctr("a", "busybox"))
		h := start(t, rt, cfg)
		h.send([]manifest.Pod{pod})
		rt.Exit("c1", 0)
		synctest.Wait()
		h.a.mu.Lock()
		var ws []*worker
		for _, w := range h.a.workers {
			ws = append(ws, w)
		}
		h.a.mu.Unlock()
		for _, w := range ws {
			<-w.reclaim()
		}
		if got := rt.Calls("destroy"); len(got) != 1 {
			t.Fatalf("destroy calls %q, want the dead container reclaimed", got)
		}
		h.stop()

		h = start(t, rt, cfg)
		h.send([]manifest.Pod{pod})
		if got := rt.Calls("start"); len(got) != 1 {
			t.Errorf("start calls %q, want the Never pod run once", got)
		}
		p := h.pod("job")
		if cs := p.Status.ContainerStatuses; p.Status.Phase != v1.PodSucceeded || len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].RestartCount != 0 {
			t.Errorf("after the restart: %s %+v, want Succeeded with its completed run", p.Status.Phase, cs)
		}

		// Its manifest removed and written again: started again on
		// purpose, the recorded final statuses forgotten.
		pod.Recreated = 1
		h.send([]manifest.Pod{pod})
		if got := rt.Calls("start"); len(got) != 2 {
			t.Errorf("start calls %q, want the recreated pod run again", got)
		}
		if _, err := os.Stat(poddir.Root(cfg.Paths.RootDir).Final("u1")); !os.IsNotExist(err) {
			t.Errorf("final.json of the recreated pod: err %v, want removed", err)
		}
	})
}
