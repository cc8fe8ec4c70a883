//go:build linux && cgo

package oci

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"
)

// A stop signal sent the moment StartContainer returns (a liveness probe that fails
// at once does this) reaches the container's own process, never
// libcontainer's init before it became that process: the init, a Go
// program and the PID namespace's init, would die of it with exit code 2,
// which the container never exits with. The container here exits 7 on
// SIGTERM; a SIGTERM that came after its exec but before its trap is
// ignored (PID 1 has no handler yet) and the SIGKILL that follows gives 137.
func TestSignalRightAfterStartReachesTheContainer(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(true)
	e.sandbox(pod)
	for i := range 15 {
		c := e.container(pod, fmt.Sprintf("early%d", i), "trap 'exit 7' TERM; while true; do sleep 0.1; done")
		st := e.start(pod, c)
		if err := e.rt.Signal(context.Background(), st.ID, syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		end, err := e.rt.Wait(ctx, st.ID)
		cancel()
		if err != nil {
			if err := e.rt.Signal(context.Background(), st.ID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			end = e.wait(st.ID)
		}
		if end.ExitCode != 7 && end.ExitCode != 137 {
			t.Errorf("run %d: SIGTERM right after the start ended the container with exit code %d (%s %s), want 7 (its trap) or 137 (SIGKILL after it ignored SIGTERM)",
				i, end.ExitCode, end.Reason, end.Message)
		}
		e.destroy(st.ID)
	}
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
}
