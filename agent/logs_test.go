package agent

import (
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// A run whose live file is gone (a rotation cut short) but whose rotated
// files are there is still a run.
func TestLogFileCountsRunsOfRotatedFiles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		paths := manifest.Paths{PodLogsDir: t.TempDir()}
		h := start(t, newFakeRuntime(), Config{Paths: paths})
		p := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		h.send([]manifest.Pod{p})
		dir := filepath.Join(paths.LogDir(p.Pod), "a")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"0.log", "0.log.20260102-030405.gz", "1.log.20260102-030406"} {
			if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for previous, want := range map[bool]string{false: "1.log", true: "0.log"} {
			got, err := h.a.LogFile("default", "web-node1", "a", previous)
			if err != nil || got != filepath.Join(dir, want) {
				t.Errorf("LogFile(previous=%v) = %q, %v; want %s", previous, got, err, want)
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
