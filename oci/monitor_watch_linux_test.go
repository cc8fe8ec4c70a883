//go:build linux

package oci

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/opencontainers/runc/libcontainer/system"
	"golang.org/x/sys/unix"
)

// leaderExitsEnv makes the test binary a process whose first thread exits
// while the others live on, the state a monitor is in while a thread other
// than its first execs the C monitor (the kernel ends the first thread, and
// /proc shows it a zombie, until the exec completes).
const leaderExitsEnv = "OCI_TEST_LEADER_EXITS"

func init() {
	// The runtime runs package inits on the first thread.
	if os.Getenv(leaderExitsEnv) == "" || unix.Gettid() != unix.Getpid() {
		return
	}
	go func() {
		for {
			time.Sleep(time.Hour)
		}
	}()
	unix.RawSyscall(unix.SYS_EXIT, 0, 0, 0) // this thread only
}

// A monitor whose first thread shows as a zombie while the process lives on
// is adopted as running; before, adoption took it for gone and recorded its
// container as killed by a dead monitor (seen when a new Runtime listed a
// container whose monitor was exec'ing into the C monitor).
func TestAdoptMonitorWhileFirstThreadExits(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), leaderExitsEnv+"=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() { _ = cmd.Process.Kill(); <-exited })
	var start uint64
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := system.Stat(pid)
		if err == nil && stat.State == system.Zombie {
			start = stat.StartTime
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("process %d: first thread never exited (%+v, %v)", pid, stat, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task"); len(tasks) < 2 {
		t.Fatalf("process %d has %d threads; want the first a zombie and others running", pid, len(tasks))
	}

	m, err := adoptMonitor(monitorState{MonitorPid: pid, MonitorStart: start})
	if err != nil || m == nil {
		t.Fatalf("adoptMonitor = %v, %v; want the live process adopted", m, err)
	}
	if m.exited() {
		t.Fatal("adopted monitor reported exited while it runs")
	}
	_ = cmd.Process.Kill()
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		t.Fatal("adopted monitor's exit not seen after kill -9")
	}
	// And a process that has really exited is not adopted.
	<-exited
	if m, err := adoptMonitor(monitorState{MonitorPid: pid, MonitorStart: start}); err != nil || m != nil {
		t.Errorf("adoptMonitor of an exited process = %v, %v; want nil", m, err)
	}
}

// A monitor whose pid now names a thread of another process (pidfd_open
// says ENOENT for a thread that leads no process) is gone: the daemon
// starts and adopts nothing in its place.
func TestAdoptMonitorWhosePidIsNowAThread(t *testing.T) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	tid := 0
	for _, e := range tasks {
		if n, err := strconv.Atoi(e.Name()); err == nil && n != os.Getpid() {
			tid = n
			break
		}
	}
	if tid == 0 {
		t.Skip("the test process has a single thread")
	}
	if m, err := adoptMonitor(monitorState{MonitorPid: tid, MonitorStart: 1}); err != nil || m != nil {
		t.Fatalf("adoptMonitor of thread %d = %v, %v; want nil, nil", tid, m, err)
	}
}
