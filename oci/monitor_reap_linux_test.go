package oci

import (
	"context"
	"os"
	"syscall"
	"testing"
)

// The daemon's wait for a monitor keeps only its process: once the monitor
// is seen gone it is reaped (no zombie child of the daemon left), and the
// exit of a container killed by a signal still says so (128+signal, from
// the exit file, not from the monitor's own status).
func TestMonitorReapedAndSignalExitKept(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(true)
	e.sandbox(pod)
	st := e.start(pod, e.container(pod, "sleeper", "exec sleep 600"))
	m, err := e.rt.monitorOf(st.ID)
	if err != nil || m == nil {
		t.Fatalf("monitor of %s: %v, %v", st.ID, m, err)
	}
	if err := e.rt.Signal(context.Background(), st.ID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := e.wait(st.ID); got.ExitCode != 128+int(syscall.SIGKILL) {
		t.Errorf("exit %d %q, want %d: killed by SIGKILL", got.ExitCode, got.Message, 128+int(syscall.SIGKILL))
	}
	<-m.done // the monitor exited, and its wait returned
	if n := zombieChildren(t, os.Getpid()); n > 0 {
		t.Errorf("the daemon has %d zombie children once its monitor is gone", n)
	}
	if err := syscall.Kill(m.pid, 0); err != syscall.ESRCH {
		t.Errorf("monitor %d still exists (kill 0: %v), want it reaped", m.pid, err)
	}
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, st.ID)
}
