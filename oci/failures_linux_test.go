//go:build linux && cgo

package oci

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/system"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

// poll calls cond every 10ms until it holds, and fails t after timeout.
func poll(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("after %v: %s", timeout, what)
		}
	}
}

func stopped(pid int) bool {
	st, err := system.Stat(pid)
	return err == nil && st.State == system.Stopped
}

// goByteWaiting says whether the go pipe of monitor pid holds its byte.
func goByteWaiting(pid int) bool {
	fd, err := unix.Open("/proc/"+strconv.Itoa(pid)+"/fd/4", unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	n, err := unix.IoctlGetInt(fd, unix.TIOCINQ)
	return err == nil && n > 0
}

// startStalledInDaemon has a separate daemon process start c, and kill -9s
// that daemon while c's monitor, told to go, stands still: stopped before it
// read its go byte (stopSpare), or once it wrote its state, before it
// creates the container.
func startStalledInDaemon(t *testing.T, e *env, pod *podspec.Pod, c *podspec.Container, stopSpare bool) stalledMonitor {
	t.Helper()
	point := mon.PauseRun
	if stopSpare {
		point = ""
	}
	return startStalledAt(t, e, pod, c, point)
}

// startStalledAt is startStalledInDaemon with the monitor stopped at pause
// point (mon.PauseRun, mon.PauseExec), or, with point "", as a spare.
func startStalledAt(t *testing.T, e *env, pod *podspec.Pod, c *podspec.Container, point string) stalledMonitor {
	t.Helper()
	stopSpare := point == ""
	args, err := json.Marshal(helperArgs{
		Cfg:   Config{RunDir: e.cfg.RunDir, RootDir: e.cfg.RootDir, CgroupRoot: e.cfg.CgroupRoot},
		Lower: e.store.lower, StoreDir: e.store.dir, Pod: *pod, Container: *c,
		Stall: true, StopSpare: stopSpare,
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(args))
	if !stopSpare {
		requirePauseHooks(t)
		cmd.Env = append(cmd.Env, monitorPauseEnv+"="+point)
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill() // kill -9
		_ = cmd.Wait()
	}()
	var sm stalledMonitor
	if err := json.NewDecoder(out).Decode(&sm); err != nil {
		t.Fatalf("daemon helper: %v", err)
	}
	// Left stopped, a monitor would outlive a failed test.
	t.Cleanup(func() { _ = syscall.Kill(sm.MonitorPid, syscall.SIGCONT) })
	if stopSpare {
		poll(t, 10*time.Second, "the daemon never told the monitor to go", func() bool { return goByteWaiting(sm.MonitorPid) })
	} else {
		poll(t, 10*time.Second, "the monitor never stopped at "+point, func() bool {
			_, err := os.Stat(filepath.Join(e.rt.containerDir(sm.ID), stateFile))
			return err == nil && stopped(sm.MonitorPid)
		})
	}
	return sm
}

func TestStartInterruptedByDaemonDeathIsAdopted(t *testing.T) {
	for _, tc := range []struct {
		name      string
		stopSpare bool
	}{
		{"monitor wrote its state", false},
		{"monitor told to go", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pod := e.pod(false)
			c := e.container(pod, "adopted", "echo up; exec sleep 600")
			sm := startStalledInDaemon(t, e, pod, c, tc.stopSpare)

			b := e.newRuntime() // the next daemon
			resume := time.AfterFunc(300*time.Millisecond, func() { _ = syscall.Kill(sm.MonitorPid, syscall.SIGCONT) })
			defer resume.Stop()
			ctx := context.Background()
			list, err := b.List(ctx)
			if err != nil || len(list) != 1 || list[0].ID != sm.ID || list[0].State != podspec.StateRunning {
				t.Fatalf("List after restart = %+v, %v; want %s running", list, err, sm.ID)
			}
			var ms monitorState
			if err := readJSON(filepath.Join(b.containerDir(sm.ID), stateFile), &ms); err != nil {
				t.Fatal(err)
			}
			if list[0].Pid != ms.Pid || syscall.Kill(ms.Pid, 0) != nil {
				t.Fatalf("List says pid %d, the monitor runs %d", list[0].Pid, ms.Pid)
			}
			waitLog(t, c.LogPath, "stdout F up")
			// Adopted, not restarted: the same process a second look.
			if again, err := b.List(ctx); err != nil || len(again) != 1 || again[0].Pid != ms.Pid || again[0].State != podspec.StateRunning {
				t.Fatalf("second List = %+v, %v; want pid %d running", again, err, ms.Pid)
			}
			if err := b.Signal(ctx, sm.ID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			defer cancel()
			st, err := b.Wait(wctx, sm.ID)
			if err != nil || st.ExitCode != 137 || st.Message != "" {
				t.Fatalf("Wait = %+v, %v; want 137 recorded by the monitor", st, err)
			}
			if got := logLines(t, c.LogPath); len(got) != 1 {
				t.Errorf("log %q, want one start", got)
			}
			if err := b.Destroy(ctx, sm.ID); err != nil {
				t.Fatal(err)
			}
			if err := b.RemoveSandbox(ctx, pod.UID); err != nil {
				t.Fatal(err)
			}
			checkClean(t, e, pod.UID, sm.ID)
		})
	}
}

func TestStartOfEarlierDaemonEnds(t *testing.T) {
	for _, tc := range []struct {
		name    string
		command []string
		resume  bool
		signal  bool // SIGTERM it rather than List it
		timeout time.Duration
		code    int
		reason  string
		message string
	}{
		{"signalled", nil, false, true, time.Minute, 137, "Error", "aborted by SIGTERM"},
		{"hung", nil, false, false, time.Second, 137, "Error", "did not finish within 1s"},
		{"failed", []string{"/no/such/binary"}, true, false, time.Minute, 128, reasonStartError, "/no/such/binary"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pod := e.pod(false)
			c := e.container(pod, "c", "exec sleep 600")
			if tc.command != nil {
				c.Command = tc.command
			}
			sm := startStalledInDaemon(t, e, pod, c, false)
			e.cfg.StartTimeout = tc.timeout
			b := e.newRuntime()
			if tc.resume {
				if err := syscall.Kill(sm.MonitorPid, syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			if tc.signal {
				sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				defer cancel()
				if err := b.Signal(sctx, sm.ID, syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				waitPidExit(t, sm.MonitorPid, 5*time.Second)
			}
			list, err := b.List(ctx)
			if err != nil || len(list) != 1 {
				t.Fatalf("List = %+v, %v; want one container", list, err)
			}
			st := list[0]
			if st.State != podspec.StateExited || st.ExitCode != tc.code || st.Reason != tc.reason || !strings.Contains(st.Message, tc.message) {
				t.Errorf("status %s %d %s %q; want exited %d %s with %q", st.State, st.ExitCode, st.Reason, st.Message, tc.code, tc.reason, tc.message)
			}
			waitPidExit(t, sm.MonitorPid, 5*time.Second)
			if err := b.Destroy(ctx, sm.ID); err != nil {
				t.Fatal(err)
			}
			if err := b.RemoveSandbox(ctx, pod.UID); err != nil {
				t.Fatal(err)
			}
			checkClean(t, e, pod.UID, sm.ID)
		})
	}
}

// A container whose monitor died with the daemon that was starting it,
// before the container's process ran, is a start that failed (StartError,
// 128, as the kubelet records one), not a container killed: it never ran.
// One whose init had been told to exec its process when its monitor died
// ran: it is a container killed, though runc's exec FIFO, which the monitor
// removes once it told the init, is still there.
func TestStartCutShortByMonitorDeathIsAStartError(t *testing.T) {
	for _, tc := range []struct {
		name  string
		point string // where the monitor stops, then dies
		told  bool   // the init was told to exec before the monitor died
		code  int
		want  string // in the message
	}{
		{"before the container was made", mon.PauseRun, false, 128, "never ran"},
		{"its init waiting on the exec FIFO", mon.PauseExec, false, 128, "never ran"},
		{"its init told to exec", mon.PauseExec, true, 137, "container monitor died; container killed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			pod := e.pod(false)
			c := e.container(pod, "c", "exec sleep 600")
			sm := startStalledAt(t, e, pod, c, tc.point)
			if tc.point == mon.PauseExec {
				poll(t, 10*time.Second, "no exec FIFO", func() bool {
					_, err := os.Lstat(filepath.Join(e.rt.libcontainerRoot(), sm.ID, "exec.fifo"))
					return err == nil
				})
			}
			if tc.point == mon.PauseExec {
				ctr, err := libcontainer.Load(e.rt.libcontainerRoot(), sm.ID)
				if err != nil {
					t.Fatal(err)
				}
				ls, err := ctr.State()
				if err != nil {
					t.Fatal(err)
				}
				// runc's init, not the container's process yet: the
				// monitor stopped before it opened the FIFO.
				if st, err := system.Stat(ls.InitProcessPid); err != nil || st.State == system.Zombie || st.Name != "runc:[2:INIT]" {
					t.Fatalf("the init (pid %d) is not waiting on the exec FIFO: %+v %v", ls.InitProcessPid, st, err)
				}
			}
			if tc.told {
				tellInitToExec(t, e, sm.ID)
			}
			if err := syscall.Kill(sm.MonitorPid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			waitPidExit(t, sm.MonitorPid, 5*time.Second)
			b := e.newRuntime() // the next daemon
			ctx := context.Background()
			list, err := b.List(ctx)
			if err != nil || len(list) != 1 {
				t.Fatalf("List = %+v, %v; want one container", list, err)
			}
			st := list[0]
			wantReason := "Error"
			if tc.code == 128 {
				wantReason = reasonStartError
			}
			if st.State != podspec.StateExited || st.ExitCode != tc.code || st.Reason != wantReason || !strings.Contains(st.Message, tc.want) {
				t.Errorf("status %s %d %s %q; want exited %d %s with %q", st.State, st.ExitCode, st.Reason, st.Message, tc.code, wantReason, tc.want)
			}
			if err := b.Destroy(ctx, sm.ID); err != nil {
				t.Fatal(err)
			}
			if err := b.RemoveSandbox(ctx, pod.UID); err != nil {
				t.Fatal(err)
			}
			checkClean(t, e, pod.UID, sm.ID)
		})
	}
}

// tellInitToExec does what runc's exec does for a monitor stopped at
// mon.PauseExec, but for removing the FIFO after: it reads the exec FIFO of
// container id, which lets its init exec the container's process, and
// waits until the process runs.
func tellInitToExec(t *testing.T, e *env, id string) {
	t.Helper()
	ctr, err := libcontainer.Load(e.rt.libcontainerRoot(), id)
	if err != nil {
		t.Fatal(err)
	}
	ls, err := ctr.State()
	if err != nil {
		t.Fatal(err)
	}
	// Opened without blocking, as a reader: the init's open returns, it
	// writes and closes. Read until that close (EOF after the byte).
	fd, err := unix.Open(filepath.Join(e.rt.libcontainerRoot(), id, "exec.fifo"), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	var got []byte
	poll(t, 10*time.Second, "the init never wrote to the exec FIFO", func() bool {
		var b [16]byte
		n, err := unix.Read(fd, b[:])
		got = append(got, b[:max(n, 0)]...)
		return n == 0 && err == nil && len(got) > 0 // EOF after the byte
	})
	comm := filepath.Join("/proc", strconv.Itoa(ls.InitProcessPid), "comm")
	poll(t, 10*time.Second, "the container's process never ran", func() bool {
		b, err := os.ReadFile(comm)
		return err == nil && string(b) == "sleep\n"
	})
}

// mountedUnder says whether anything is mounted under dir.
func mountedUnder(t *testing.T, dir string) bool {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Contains(string(mi), " "+dir+"/") || strings.Contains(string(mi), " "+dir+" ")
}

func TestNewRemovesWhatInterruptedStartsLeft(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	kept := e.start(pod, e.container(pod, "kept", "exec sleep 600"))
	// Daemons killed between preparing a rootfs and writing the record:
	// one had made the state dir, one not yet.
	half, lone := randHex(16), randHex(16)
	if err := os.MkdirAll(e.rt.containerDir(half), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{half, lone} {
		if _, _, err := e.store.Prepare(id, testImage); err != nil {
			t.Fatal(err)
		}
	}

	b := e.newRuntime()
	for _, id := range []string{half, lone} {
		if mountedUnder(t, filepath.Join(e.store.dir, id)) {
			t.Errorf("rootfs of %s still mounted", id)
		}
		for _, p := range []string{filepath.Join(e.store.dir, id), b.containerDir(id)} {
			if _, err := os.Stat(p); err == nil {
				t.Errorf("left behind: %s", p)
			}
		}
	}
	if !mountedUnder(t, filepath.Join(e.store.dir, kept.ID)) {
		t.Errorf("rootfs of running container %s unmounted", kept.ID)
	}
	ctx := context.Background()
	if l, err := b.List(ctx); err != nil || len(l) != 1 || l[0].ID != kept.ID || l[0].State != podspec.StateRunning {
		t.Fatalf("List = %+v, %v; want %s running", l, err, kept.ID)
	}
	if err := b.Signal(ctx, kept.ID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Wait(ctx, kept.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.Destroy(ctx, kept.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveSandbox(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, kept.ID, half, lone)
}

// failingStore fails Release while fail is set.
type failingStore struct {
	overlayStore
	fail *atomic.Bool
}

func (s failingStore) Release(key string) error {
	if s.fail.Load() {
		return errors.New("injected release failure")
	}
	return s.overlayStore.Release(key)
}

func TestFailedRemovalKeepsTheContainer(t *testing.T) {
	e := newEnv(t)
	var fail atomic.Bool
	e.cfg.Images = failingStore{overlayStore: e.store, fail: &fail}
	e.rt = e.newRuntime()
	pod := e.pod(false)
	e.sandbox(pod)
	st := e.wait(e.start(pod, e.container(pod, "c", "exit 3")).ID)
	fail.Store(true)
	ctx := context.Background()
	if err := e.rt.Destroy(ctx, st.ID); err == nil {
		t.Fatal("Destroy succeeded with its rootfs not released")
	}
	// Still there to be destroyed again, by this daemon or the next.
	l, err := e.newRuntime().List(ctx)
	if err != nil || len(l) != 1 || l[0].ID != st.ID || l[0].ExitCode != 3 {
		t.Fatalf("List after a failed Destroy = %+v, %v; want %s exited 3", l, err, st.ID)
	}
	fail.Store(false)
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, st.ID)
}

// zombieChildren counts the zombies whose parent is process ppid.
func zombieChildren(t *testing.T, ppid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		i := bytes.LastIndexByte(data, ')')
		if i < 0 || i+2 > len(data) {
			continue
		}
		f := strings.Fields(string(data[i+2:])) // state, ppid, ...
		if len(f) > 1 && f[0] == "Z" && f[1] == strconv.Itoa(ppid) {
			n++
		}
	}
	return n
}

func TestHostPIDOrphansAreReaped(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(true)
	pod.HostPID = true
	e.sandbox(pod)
	// Each subshell exits at once: its sleep is orphaned to the monitor.
	c := e.container(pod, "forker",
		"i=0; while [ $i -lt 50 ]; do (sleep 0.01 &); i=$((i+1)); done; echo spawned; exec sleep 600")
	st := e.start(pod, c)
	waitLog(t, c.LogPath, "stdout F spawned")
	var ms monitorState
	if err := readJSON(filepath.Join(e.rt.containerDir(st.ID), stateFile), &ms); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // the orphans' lifetime, many times over
	if n := zombieChildren(t, ms.MonitorPid); n > 0 {
		t.Errorf("monitor %d has %d zombie children a second after they exited", ms.MonitorPid, n)
	}
	if err := e.rt.Signal(context.Background(), st.ID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := e.wait(st.ID); got.ExitCode != 137 || got.Message != "" {
		t.Errorf("exit %d %q, want 137 as init's status says", got.ExitCode, got.Message)
	}
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, st.ID)
}

func TestStoppedMonitorDoesNotBlockKill(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	st := e.start(pod, e.container(pod, "c", "while :; do sleep 1; done"))
	var ms monitorState
	if err := readJSON(filepath.Join(e.rt.containerDir(st.ID), stateFile), &ms); err != nil {
		t.Fatal(err)
	}
	stopMonitor(t, ms.MonitorPid)
	if err := e.rt.Signal(context.Background(), st.ID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), unresponsiveAfter+10*time.Second)
	defer cancel()
	got, err := e.rt.Wait(ctx, st.ID)
	if err != nil {
		t.Fatalf("Wait with a stopped monitor: %v", err)
	}
	if got.ExitCode != 137 || !strings.Contains(got.Message, "unresponsive") {
		_, state, _ := procParent(ms.MonitorPid)
		t.Errorf("exit %d %q, want 137 saying the monitor was unresponsive (monitor %d state %q)",
			got.ExitCode, got.Message, ms.MonitorPid, state)
	}
	waitPidExit(t, ms.MonitorPid, 5*time.Second)
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, st.ID)
}

// stopMonitor stops the running monitor pid with SIGSTOP and returns once
// it is stopped; the test's end lets it go on. It first waits for the Go
// monitor's exec into the C one: the kernel drops a stop signal that reaches
// a process while it execs (do_signal_stop during de_thread), and the
// monitor would run on unstopped (seen in CI: the exit recorded at once).
func stopMonitor(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			t.Fatalf("monitor %d: %v", pid, err)
		}
		if args := strings.Split(string(b), "\x00"); len(args) > 1 && args[1] == mon.RunningArg {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("monitor %d did not exec its running half within 10s: %q", pid, b)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGCONT) })
	for {
		if _, state, ok := procParent(pid); ok && state == 'T' {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("monitor %d not stopped 10s after SIGSTOP", pid)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestExitRecordedBeforeCleanUp(t *testing.T) {
	e := newEnv(t)
	requirePauseHooks(t)
	t.Setenv(monitorPauseEnv, mon.PauseDestroy) // for the monitors started from now on
	// A new runtime: the spare monitor the first one may have started before
	// the variable was set would not pause.
	e.rt = e.newRuntime()
	pod := e.pod(false)
	e.sandbox(pod)
	st := e.start(pod, e.container(pod, "c", "exit 3"))
	var ms monitorState
	if err := readJSON(filepath.Join(e.rt.containerDir(st.ID), stateFile), &ms); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(ms.MonitorPid, syscall.SIGCONT) })
	poll(t, 10*time.Second, "the monitor never stopped before its clean-up", func() bool { return stopped(ms.MonitorPid) })
	if got := e.wait(st.ID); got.ExitCode != 3 {
		t.Errorf("exit %d while the monitor cleans up, want 3", got.ExitCode)
	}
	// It dies before it destroyed the container: the daemon does.
	if err := syscall.Kill(ms.MonitorPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if got := e.wait(st.ID); got.ExitCode != 3 {
		t.Errorf("exit %d once the monitor died, want 3", got.ExitCode)
	}
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, st.ID)
}

func TestMissingImageKeepsSpareMonitor(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	pm := spare(t, e.rt)
	c := e.container(pod, "x", "true")
	c.Image = "docker.io/library/missing:1"
	for range 3 {
		if _, err := e.rt.StartContainer(context.Background(), pod, c); !errors.Is(err, podspec.ErrImageNotPresent) {
			t.Fatalf("Start = %v, want ErrImageNotPresent", err)
		}
	}
	e.rt.mu.Lock()
	got := e.rt.spare
	e.rt.mu.Unlock()
	if got != pm || pm.m.exited() {
		t.Errorf("spare monitor used up by starts of a missing image")
	}
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID)
}

// A monitor whose exec into the C monitor fails (the daemon was already told
// the container runs) kills the container and records that as its exit, not
// as a start that failed. (What the container wrote before the kill is
// copied as after a failed Run; whether it wrote anything before the kill is
// a race, so it is not checked here.)
func TestHandOverFailureRecordedAsKill(t *testing.T) {
	e := newEnv(t)
	requirePauseHooks(t)
	t.Setenv(monitorPauseEnv, monitorFailHandOver) // for the monitors started from now on
	e.rt = e.newRuntime()                          // not the spare started before
	pod := e.pod(false)
	e.sandbox(pod)
	c := e.container(pod, "c", "sleep 30")
	st := e.start(pod, c)
	got := e.wait(st.ID)
	if got.ExitCode != 137 || got.Reason == reasonStartError || !strings.Contains(got.Message, "exec the running monitor") {
		t.Errorf("exit = %d %q %q, want 137, not %s, naming the failed exec", got.ExitCode, got.Reason, got.Message, reasonStartError)
	}
	if _, err := os.Stat(c.LogPath); err != nil {
		t.Errorf("no log file after the failed hand-over: %v", err)
	}
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
}

// A container in the host's PID namespace whose init exits while a child of
// it writes on: the exit recorder kills what is left in its cgroup and copies
// the rest of the output with the C writer to the pipes' end, and the exit is
// init's.
func TestHostPIDLeftoverWriterKilledAndDrained(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(true)
	pod.HostPID = true
	e.sandbox(pod)
	c := e.container(pod, "leaver",
		"(while :; do echo left over; sleep 0.01; done) & sleep 0.3; echo init done; exit 3")
	st := e.start(pod, c)
	if got := e.wait(st.ID); got.ExitCode != 3 {
		t.Errorf("exit %d %q, want 3 as init's status says", got.ExitCode, got.Message)
	}
	waitLog(t, c.LogPath, "stdout F init done")
	b, err := os.ReadFile(c.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "stdout F left over\n") {
		t.Errorf("log without the leftover's output:\n%s", b)
	}
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, st.ID)
}

// A container whose exit is recorded is due for AfterExit, as it is for
// Wait, though its monitor has not exited yet (it is cleaning up): a wait
// asked for then is not held until the clean-up ends.
func TestAfterExitOnceTheExitIsRecorded(t *testing.T) {
	e := newEnv(t)
	requirePauseHooks(t)
	t.Setenv(monitorPauseEnv, mon.PauseDestroy)
	e.rt = e.newRuntime()
	pod := e.pod(false)
	e.sandbox(pod)
	st := e.start(pod, e.container(pod, "c", "exit 3"))
	var ms monitorState
	if err := readJSON(filepath.Join(e.rt.containerDir(st.ID), stateFile), &ms); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(ms.MonitorPid, syscall.SIGCONT) })
	poll(t, 10*time.Second, "the monitor never stopped before its clean-up", func() bool { return stopped(ms.MonitorPid) })

	called := make(chan struct{})
	e.rt.AfterExit(context.Background(), st.ID, func() { close(called) })
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Error("AfterExit did not call back for a container whose exit is recorded, its monitor cleaning up")
	}
	if got := e.wait(st.ID); got.ExitCode != 3 {
		t.Errorf("exit %d, want 3", got.ExitCode)
	}
	if err := syscall.Kill(ms.MonitorPid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, st.ID)
}
