//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// spare returns the runtime's spare monitor, once there is one.
func spare(t *testing.T, r *Runtime) *pendingMonitor {
	t.Helper()
	pm := waitSpare(r, 10*time.Second)
	if pm == nil {
		t.Fatal("no spare monitor")
	}
	return pm
}

// waitSpare returns the runtime's spare monitor once there is one, or nil
// after timeout.
func waitSpare(r *Runtime, timeout time.Duration) *pendingMonitor {
	r.refillSpare()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for {
		r.mu.Lock()
		pm := r.spare
		r.mu.Unlock()
		if pm != nil {
			return pm
		}
		select {
		case <-tick.C:
		case <-deadline:
			return nil
		}
	}
}

func TestStartThatHangsIsKilledAndCleanedUp(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel bool // cancel ctx rather than let StartTimeout expire
		want   error
	}{
		{"timeout", false, ErrStartTimeout},
		{"cancelled", true, context.Canceled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.cfg.StartTimeout = 2 * time.Second
			e.rt = e.newRuntime()
			pod := e.pod(false)
			e.sandbox(pod)
			// The next container's monitor, stopped: it never reports, as one
			// waiting for a wedged runc init or mount.
			pm := spare(t, e.rt)
			id := pm.id
			if err := syscall.Kill(pm.m.pid, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tc.cancel {
				time.AfterFunc(500*time.Millisecond, cancel)
			}
			begin := time.Now()
			_, err := e.rt.StartContainer(ctx, pod, e.container(pod, "hangs", "true"))
			took := time.Since(begin)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Start = %v, want %v", err, tc.want)
			}
			if took > 5*time.Second {
				t.Errorf("Start returned after %v", took)
			}
			var ms monitorState
			if ok, _ := readOptionalJSON(filepath.Join(e.rt.containerDir(id), stateFile), &ms); ok {
				t.Errorf("state of %s left behind: %+v", id, ms)
			}
			if l, err := e.rt.List(context.Background()); err != nil || len(l) != 0 {
				t.Errorf("List after the failed start = %v, %v; want nothing", l, err)
			}
			// The pod is usable: the next start works.
			st := e.wait(e.start(pod, e.container(pod, "next", "exit 7")).ID)
			if st.ExitCode != 7 {
				t.Errorf("next container exit %d, want 7", st.ExitCode)
			}
			e.destroy(st.ID)
			if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
				t.Fatal(err)
			}
			checkClean(t, e, pod.UID, id, st.ID)
		})
	}
}

// threads is this process's thread count.
func threads(t *testing.T) int {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(l, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads in /proc/self/status")
	return 0
}

func TestWatchingMonitorsTakesNoThreadEach(t *testing.T) {
	const n = 20
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	warm := e.start(pod, e.container(pod, "warm", "sleep 600"))
	before := threads(t)
	ids := []string{warm.ID}
	for i := range n {
		ids = append(ids, e.start(pod, e.container(pod, "c"+strconv.Itoa(i), "sleep 600")).ID)
	}
	started := threads(t)

	b := e.newRuntime() // a new daemon adopts them all
	if l, err := b.List(context.Background()); err != nil || len(l) != n+1 {
		t.Fatalf("List = %d containers, %v; want %d", len(l), err, n+1)
	}
	adopted := threads(t)
	t.Logf("threads: %d before, %d after %d starts, %d after adopting them", before, started, n, adopted)
	if started-before >= n/2 || adopted-started >= n/2 {
		t.Errorf("threads grew from %d to %d with %d started monitors and to %d once adopted: one per monitor",
			before, started, n, adopted)
	}
	for _, id := range ids {
		if err := b.Signal(context.Background(), id, 9); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Wait(context.Background(), id); err != nil {
			t.Fatal(err)
		}
		if err := b.Destroy(context.Background(), id); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, ids...)
}

func TestPodContainersShareDevShm(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	w := e.start(pod, e.container(pod, "writer", "echo shared > /dev/shm/x"))
	if st := e.wait(w.ID); st.ExitCode != 0 {
		t.Fatalf("writer exit %d", st.ExitCode)
	}
	rc := e.container(pod, "reader", "cat /dev/shm/x")
	r := e.wait(e.start(pod, rc).ID)
	if got := logLines(t, rc.LogPath); r.ExitCode != 0 || len(got) != 1 || got[0] != "stdout F shared" {
		t.Errorf("reader exit %d, log %q; want what the writer put in /dev/shm", r.ExitCode, got)
	}
	other := e.pod(false)
	e.sandbox(other)
	oc := e.container(other, "stranger", "cat /dev/shm/x")
	if st := e.wait(e.start(other, oc).ID); st.ExitCode == 0 {
		t.Errorf("another pod read /dev/shm/x: %q", logLines(t, oc.LogPath))
	} else {
		e.destroy(st.ID)
	}
	for _, id := range []string{w.ID, r.ID} {
		e.destroy(id)
	}
	for _, p := range []*podspec.Pod{pod, other} {
		if err := e.rt.RemoveSandbox(context.Background(), p.UID); err != nil {
			t.Fatal(err)
		}
	}
	checkClean(t, e, pod.UID, w.ID, r.ID)
}

// pidsFile is a file of the pod cgroup's pids controller (v1 or v2).
func pidsFile(t *testing.T, e *env, uid, name string) string {
	t.Helper()
	p := path.Join(e.cfg.CgroupRoot, "pod"+uid, name)
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return filepath.Join("/sys/fs/cgroup", p)
	}
	return filepath.Join("/sys/fs/cgroup/pids", p)
}

func TestPodPidsLimit(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	pod.PidsLimit = 20
	e.sandbox(pod)
	if data, err := os.ReadFile(pidsFile(t, e, pod.UID, "pids.max")); err != nil || strings.TrimSpace(string(data)) != "20" {
		t.Fatalf("pod pids.max = %q, %v; want 20", data, err)
	}
	// The inner shell gives up at its first failed fork; the outer one only
	// reports, and then forks no more.
	c := e.container(pod, "forker",
		"sh -c 'i=0; while [ $i -lt 40 ]; do sleep 600 & i=$((i+1)); done'; echo tried; exec sleep 600")
	st := e.start(pod, c)
	waitLog(t, c.LogPath, "stdout F tried")
	data, err := os.ReadFile(pidsFile(t, e, pod.UID, "pids.current"))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := strconv.Atoi(strings.TrimSpace(string(data))); err != nil || n > 20 {
		t.Errorf("pod has %s processes, want at most 20", data)
	}
	if err := e.rt.Signal(context.Background(), st.ID, 9); err != nil {
		t.Fatal(err)
	}
	e.destroy(e.wait(st.ID).ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, st.ID)
}

func TestGracePeriodKeptWithContainers(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	pod.TerminationGracePeriod = 300 * time.Second
	e.sandbox(pod)
	st := e.start(pod, e.container(pod, "etcd", "exit 0"))
	if st.TerminationGracePeriod != pod.TerminationGracePeriod {
		t.Errorf("Start returned grace %v, want %v", st.TerminationGracePeriod, pod.TerminationGracePeriod)
	}
	e.wait(st.ID)
	l, err := e.newRuntime().List(context.Background()) // after a restart
	if err != nil || len(l) != 1 || l[0].TerminationGracePeriod != 300*time.Second {
		t.Fatalf("List after restart = %+v, %v; want the grace period of 300s", l, err)
	}
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, st.ID)
}
