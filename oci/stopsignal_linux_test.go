//go:build linux && cgo

package oci

import (
	"context"
	"syscall"
	"testing"
	"time"
)

// The runtime records what stops each container: its own stop signal, else
// its image's, else SIGTERM; a restarted daemon knows it too.
func TestStopSignalRecorded(t *testing.T) {
	e := newEnv(t)
	e.store.stopSignal = "usr2"
	e.cfg.Images = e.store
	e.rt = e.newRuntime()
	pod := e.pod(false)
	e.sandbox(pod)
	// The container's exits only on the signal it says stops it.
	own := e.container(pod, "own", "trap 'exit 7' USR1; while true; do sleep 1 & wait $!; done")
	own.StopSignal = syscall.SIGUSR1
	imgs := e.container(pod, "image", "trap 'exit 8' USR2; while true; do sleep 1 & wait $!; done")
	ownSt, imgSt := e.start(pod, own), e.start(pod, imgs)
	if ownSt.StopSignal != syscall.SIGUSR1 || imgSt.StopSignal != syscall.SIGUSR2 {
		t.Errorf("stop signals %v and %v, want SIGUSR1 (the container's) and SIGUSR2 (the image's)", ownSt.StopSignal, imgSt.StopSignal)
	}
	e.store.stopSignal = "SIGNOPE"
	e.cfg.Images = e.store
	e.rt = e.newRuntime()
	bad := e.start(pod, e.container(pod, "bad", "trap 'exit 9' TERM; while true; do sleep 1 & wait $!; done"))
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
