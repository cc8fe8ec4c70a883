//go:build linux && cgo

package oci

import (
	"context"
	"maps"
	"syscall"
	"testing"
	"time"
)

// The runtime records what stops each container: its own stop signal, else
// its image's, else SIGTERM, and the agent's annotations (its preStop hook);
// a restarted daemon knows them too.
func TestStopSignalRecorded(t *testing.T) {
	e := newEnv(t)
	e.store.stopSignal = "usr2"
	e.cfg.Images = e.store
	e.rt = e.newRuntime()
	pod := e.pod(false)
	e.sandbox(pod)
	// The container's exits only on the signal it says stops it.
	own := e.container(pod, "own", "trap 'exit 7' USR1; echo ready; while true; do sleep 1 & wait $!; done")
	own.StopSignal = syscall.SIGUSR1
	own.Annotations = map[string]string{"io.kubernetes.container.preStopHandler": `{"sleep":{"seconds":1}}`}
	imgs := e.container(pod, "image", "trap 'exit 8' USR2; echo ready; while true; do sleep 1 & wait $!; done")
	ownSt, imgSt := e.start(pod, own), e.start(pod, imgs)
	if ownSt.StopSignal != syscall.SIGUSR1 || imgSt.StopSignal != syscall.SIGUSR2 {
		t.Errorf("stop signals %v and %v, want SIGUSR1 (the container's) and SIGUSR2 (the image's)", ownSt.StopSignal, imgSt.StopSignal)
	}
	e.store.stopSignal = "SIGNOPE"
	e.cfg.Images = e.store
	e.rt = e.newRuntime()
	badC := e.container(pod, "bad", "trap 'exit 9' TERM; echo ready; while true; do sleep 1 & wait $!; done")
	bad := e.start(pod, badC)
	// Signalled only once their traps are set: PID 1 ignores a signal it
	// has no handler for.
	for _, c := range []string{own.LogPath, imgs.LogPath, badC.LogPath} {
		waitLog(t, c, "stdout F ready")
	}
	if bad.StopSignal != syscall.SIGTERM {
		t.Errorf("an image whose StopSignal means nothing: %v, want SIGTERM", bad.StopSignal)
	}
	list, err := e.rt.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]syscall.Signal{}
	for _, c := range list {
		got[c.Name] = c.StopSignal
		if want := own.Annotations; c.Name == "own" && !maps.Equal(c.Annotations, want) {
			t.Errorf("adopted annotations %v, want %v", c.Annotations, want)
		}
	}
	if got["own"] != syscall.SIGUSR1 || got["image"] != syscall.SIGUSR2 || got["bad"] != syscall.SIGTERM {
		t.Errorf("adopted stop signals %v", got)
	}
	for _, c := range list {
		if err := e.rt.Signal(context.Background(), c.ID, c.StopSignal); err != nil {
			t.Fatal(err)
		}
	}
	codes := map[string]int{}
	for _, c := range list {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		st, err := e.rt.Wait(ctx, c.ID)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		codes[c.Name] = st.ExitCode
		e.destroy(c.ID)
	}
	if codes["own"] != 7 || codes["image"] != 8 || codes["bad"] != 9 {
		t.Errorf("exit codes after each stop signal: %v, want own 7, image 8, bad 9", codes)
	}
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
}
