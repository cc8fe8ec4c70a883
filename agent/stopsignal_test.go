package agent

import (
	"slices"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// A container with lifecycle.stopSignal is stopped with it, then SIGKILL
// after the grace period as always; its status names the signal.
func TestStopSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		quit := ctr("quits", "busybox")
		usr1 := v1.Signal("SIGUSR1")
		quit.Lifecycle = &v1.Lifecycle{StopSignal: &usr1}
		deaf := ctr("deaf", "busybox")
		deaf.Lifecycle = &v1.Lifecycle{StopSignal: &usr1}
		rt.stubborn["deaf"] = true
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, quit, deaf, ctr("plain", "busybox"))})
		for _, cs := range h.pod("web").Status.ContainerStatuses {
			want := "SIGUSR1"
			if cs.Name == "plain" {
				want = "SIGTERM"
			}
			if cs.StopSignal == nil || string(*cs.StopSignal) != want {
				t.Errorf("container %s: stopSignal %v, want %s", cs.Name, cs.StopSignal, want)
			}
		}
		t0 := time.Now()
		h.send(nil)
		time.Sleep(10 * time.Second)
		synctest.Wait()
		got := rt.Calls("signal")
		slices.Sort(got)
		want := []string{"signal c1 user defined signal 1", "signal c2 killed", "signal c2 user defined signal 1", "signal c3 terminated"}
		if !slices.Equal(got, want) {
			t.Fatalf("signals = %q, want %q", got, want)
		}
		if rt.Len() != 0 {
			t.Errorf("pod not removed 10s after; calls %q (began %v)", rt.Calls(), t0)
		}
	})
}

// A container found running after a restart, whose pod no manifest wants,
// is stopped with the signal the runtime recorded for it.
func TestAdoptedContainerStoppedWithItsSignal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		rt.adopt(podspec.ContainerStatus{ID: "old", PodUID: "u0", PodName: "gone-node1", Name: "x",
			State: podspec.StateRunning, StopSignal: syscall.SIGQUIT})
		h := start(t, rt, Config{})
		h.send(nil)
		if got := rt.Calls("signal"); !slices.Equal(got, []string{"signal old quit"}) {
			t.Errorf("signals = %q, want SIGQUIT", got)
		}
	})
}
