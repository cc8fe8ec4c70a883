//go:build linux && cgo

package oci

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The same with real containers: reloads (SetLogRotation, SIGHUP to every
// monitor) while containers exit keep their exit codes (they were recorded
// as lost monitors, 137) and never make a removal fail.
func TestReloadWhileContainersExitKeepsExits(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_ = e.rt.SetLogRotation(1<<20, 3)
			time.Sleep(2 * time.Millisecond)
		}
	}()
	lost := 0
	const n = 10
	for i := range n {
		c := e.container(pod, fmt.Sprintf("c%d", i), "sleep 0.1; exit 3")
		st := e.start(pod, c)
		got := e.wait(st.ID)
		if got.ExitCode != 3 {
			lost++
			t.Logf("container %d: exit code %d message %q, want 3", i, got.ExitCode, got.Message)
		}
		if err := e.rt.Destroy(context.Background(), st.ID); err != nil {
			t.Errorf("destroy during reloads: %v", err) // a rotation file written into a dir being removed
		}
	}
	close(stop)
	<-done
	if lost > 0 {
		t.Errorf("%d of %d exit codes lost to a reload", lost, n)
	}
	_ = e.rt.RemoveSandbox(context.Background(), pod.UID)
}
