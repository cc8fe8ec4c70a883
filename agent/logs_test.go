package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

// The run logs and logs --previous show is the one the kubelet's
// validateContainerLogStatus picks: while a crash-looping container waits out
// its back-off, both show the run that just crashed (lastState); once it runs
// again, logs shows the new run and --previous the crashed one.
func TestLogFileFollowsTheKubeletsChoice(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		paths := manifest.Paths{PodLogsDir: t.TempDir()}
		rt := newFakeRuntime()
		h := start(t, rt, Config{Paths: paths})
		p := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		h.send([]manifest.Pod{p})
		dir := filepath.Join(paths.LogDir(p.Pod), "a")
		logFile := func(previous bool) (string, error) {
			return h.a.LogFile(t.Context(), "default", "web-node1", "a", previous)
		}
		if got, err := logFile(false); err != nil || got != filepath.Join(dir, "0.log") {
			t.Errorf("running: logs = %q, %v; want 0.log", got, err)
		}
		if _, err := logFile(true); err == nil || !strings.Contains(err.Error(), `previous terminated container "a" in pod "default/web-node1" not found`) {
			t.Errorf("first run: logs --previous err %v, want the kubelet's not found", err)
		}

		rt.mu.Lock()
		rt.crash["a"] = 1
		rt.mu.Unlock()
		rt.Exit("c1", 1)
		// Crash until the back-off holds the container waiting.
		for range 5 {
			time.Sleep(time.Minute)
			synctest.Wait()
		}
		st := h.pod("web").Status.ContainerStatuses[0]
		if st.State.Waiting == nil || st.State.Waiting.Reason != "CrashLoopBackOff" || st.LastTerminationState.Terminated == nil {
			t.Fatalf("container status %+v, want CrashLoopBackOff with a last state", st)
		}
		last := int(st.RestartCount)
		// The monitor writes a run's log file; the fake runtime does not.
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{logfiles.LogFileName(last - 1), logfiles.LogFileName(last) + ".20260102-030405.gz", logfiles.LogFileName(last + 1)} {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		crashed := filepath.Join(dir, logfiles.LogFileName(last))
		for _, previous := range []bool{false, true} {
			if got, err := logFile(previous); err != nil || got != crashed {
				t.Errorf("CrashLoopBackOff: LogFile(previous=%v) = %q, %v; want the run that crashed, %s", previous, got, err, crashed)
			}
		}

		rt.mu.Lock()
		delete(rt.crash, "a")
		rt.mu.Unlock()
		time.Sleep(10 * time.Minute)
		synctest.Wait()
		if st := h.pod("web").Status.ContainerStatuses[0]; st.State.Running == nil {
			t.Fatalf("container status %+v, want running again", st)
		}
		for previous, want := range map[bool]string{false: logfiles.LogFileName(last + 1), true: logfiles.LogFileName(last)} {
			if got, err := logFile(previous); err != nil || got != filepath.Join(dir, want) {
				t.Errorf("running again: LogFile(previous=%v) = %q, %v; want %s", previous, got, err, want)
			}
		}
	})
}

// A followed log ends when its container will not run again: it exited and
// the restart policy says so, or its pod (that generation) is gone. Each
// status change is told to subscribers.
func TestLogEnded(t *testing.T) {
	for _, tc := range []struct {
		policy v1.RestartPolicy
		exit   int
		ended  bool
	}{
		{v1.RestartPolicyAlways, 0, false},
		{v1.RestartPolicyAlways, 1, false},
		{v1.RestartPolicyOnFailure, 1, false},
		{v1.RestartPolicyOnFailure, 0, true},
		{v1.RestartPolicyNever, 1, true},
	} {
		t.Run(string(tc.policy), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				paths := manifest.Paths{PodLogsDir: t.TempDir()}
				rt := newFakeRuntime()
				h := start(t, rt, Config{Paths: paths})
				p := testPod("web", "u1", tc.policy, ctr("a", "busybox"))
				h.send([]manifest.Pod{p})
				path := filepath.Join(paths.LogDir(p.Pod), "a", "0.log")
				if h.a.LogEnded("default", "web-node1", "a", path) {
					t.Fatal("ended while the container runs")
				}
				changed := h.a.Changed()
				rt.Exit("c1", tc.exit)
				synctest.Wait()
				select {
				case <-changed:
				default:
					t.Fatal("the container's exit was not told to Changed's subscribers")
				}
				if got := h.a.LogEnded("default", "web-node1", "a", path); got != tc.ended {
					t.Errorf("after exit %d: ended %v, want %v", tc.exit, got, tc.ended)
				}
				other := filepath.Join(paths.PodLogsDir, "default_web-node1_u0", "a", "0.log")
				if !h.a.LogEnded("default", "web-node1", "a", other) {
					t.Error("the log of an older generation of the pod has not ended")
				}
				changed = h.a.Changed()
				h.send(nil)
				if !h.a.LogEnded("default", "web-node1", "a", path) {
					t.Error("the log of a removed pod has not ended")
				}
				select {
				case <-changed:
				default:
					t.Error("the pod's removal was not told to Changed's subscribers")
				}
			})
		})
	}
}

// An init container that succeeded never runs again; one that failed does,
// unless the pod's policy is Never.
func TestLogEndedInitContainer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		paths := manifest.Paths{PodLogsDir: t.TempDir()}
		rt := newFakeRuntime()
		h := start(t, rt, Config{Paths: paths})
		p := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		p.Pod.Spec.InitContainers = []v1.Container{ctr("init", "busybox")}
		h.send([]manifest.Pod{p})
		path := filepath.Join(paths.LogDir(p.Pod), "init", "0.log")
		rt.Exit("c1", 1)
		synctest.Wait()
		if h.a.LogEnded("default", "web-node1", "init", path) {
			t.Error("a failed init container's log ended; it runs again")
		}
		rt.Exit("c2", 0)
		synctest.Wait()
		if !h.a.LogEnded("default", "web-node1", "init", path) {
			t.Error("a succeeded init container's log has not ended")
		}
	})
}

// During an edit the old generation is listed Terminating beside the new
// one, under the same name, in either order: exec, logs, debug and the
// restart-on-change signals act on the new one.
func TestPodSetFindsTheNewGeneration(t *testing.T) {
	gen := func(uid string, terminating bool) v1.Pod {
		p := v1.Pod{}
		p.Namespace, p.Name, p.UID = "default", "web-node1", types.UID(uid)
		if terminating {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		return p
	}
	for _, pods := range [][]v1.Pod{
		{gen("old", true), gen("new", false)},
		{gen("new", false), gen("old", true)},
	} {
		if p := (podSet{pods: pods}).find("default", "web-node1"); p == nil || p.UID != "new" {
			t.Errorf("find in %v = %v, want the new generation", []types.UID{pods[0].UID, pods[1].UID}, p)
		}
	}
	if p := (podSet{pods: []v1.Pod{gen("old", true)}}).find("default", "web-node1"); p == nil || p.UID != "old" {
		t.Errorf("find with only the terminating generation = %v, want it", p)
	}
	if p := (podSet{pods: []v1.Pod{gen("new", false)}}).find("other", "web-node1"); p != nil {
		t.Errorf("find in another namespace = %v, want none", p)
	}
}
