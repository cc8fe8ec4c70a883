//go:build linux && cgo

package oci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	mon "github.com/staticpodd/staticpodd/oci/monitor"
)

func TestExitCodesAndLogs(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	for _, tc := range []struct {
		name, script string
		kill         bool // SIGKILL once it logged
		code         int
		reason       string
		log          []string
	}{
		{"ok", "echo hello; echo oops >&2", false, 0, "Completed", []string{"stdout F hello", "stderr F oops"}},
		{"three", "echo -n partial; exit 3", false, 3, "Error", []string{"stdout P partial"}},
		{"killed", "echo bye; while :; do sleep 1; done", true, 137, "Error", []string{"stdout F bye"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.container(pod, tc.name, tc.script)
			started := e.start(pod, c)
			if started.Pid <= 0 || started.State != podspec.StateRunning {
				t.Fatalf("Start returned %+v, want running with a pid", started)
			}
			if tc.kill {
				waitLog(t, c.LogPath, tc.log[0])
				if err := e.rt.Signal(context.Background(), started.ID, syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			st := e.wait(started.ID)
			if st.State != podspec.StateExited || st.ExitCode != tc.code || st.Reason != tc.reason {
				t.Errorf("exit: state %s code %d reason %q, want exited %d %q", st.State, st.ExitCode, st.Reason, tc.code, tc.reason)
			}
			if st.FinishedAt.Before(st.StartedAt) || st.StartedAt.IsZero() {
				t.Errorf("startedAt %v finishedAt %v", st.StartedAt, st.FinishedAt)
			}
			got := logLines(t, c.LogPath)
			slices.Sort(got)
			want := slices.Sorted(slices.Values(tc.log))
			if !slices.Equal(got, want) {
				t.Errorf("log %q, want %q", got, want)
			}
			e.destroy(st.ID)
		})
	}
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
}

func TestSignalAndDestroyRefusesRunning(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	c := e.container(pod, "trap", "trap 'echo got TERM; exit 42' TERM; echo ready; while :; do sleep 0.05; done")
	st := e.start(pod, c)
	if err := e.rt.Destroy(context.Background(), st.ID); err == nil {
		t.Fatal("Destroy of a running container succeeded")
	}
	waitLog(t, c.LogPath, "stdout F ready")
	if err := e.rt.Signal(context.Background(), st.ID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := e.wait(st.ID); got.ExitCode != 42 {
		t.Errorf("exit code %d after SIGTERM, want 42 from the trap", got.ExitCode)
	}
	if err := e.rt.Signal(context.Background(), st.ID, syscall.SIGTERM); err != nil {
		t.Errorf("Signal of an exited container: %v", err)
	}
	e.destroy(st.ID)
	e.destroy(st.ID) // idempotent
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, st.ID)
}

// waitLog waits until the CRI log at path has line (stream, tag, content).
func waitLog(t *testing.T, path, line string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		if data, err := os.ReadFile(path); err == nil && strings.Contains(string(data), " "+line+"\n") {
			return
		}
		select {
		case <-tick.C:
		case <-deadline:
			t.Fatalf("log %s never had %q", path, line)
		}
	}
}

func TestPodSharesNetworkIPCAndHostname(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	// The server answers on the pod's loopback; the client, another
	// container, reaches it there (busybox httpd and wget: nc's end of
	// input raced its sending on a loaded machine).
	server := e.container(pod, "server", "hostname; mkdir -p /www; echo hello > /www/f; exec httpd -f -p 127.0.0.1:8080 -h /www")
	client := e.container(pod, "client",
		"hostname; for i in $(seq 200); do wget -qO- http://127.0.0.1:8080/f 2>/dev/null && exit 0; sleep 0.05; done; exit 1")
	s := e.start(pod, server)
	c := e.start(pod, client)
	if st := e.wait(c.ID); st.ExitCode != 0 {
		t.Fatalf("client exit %d: %q", st.ExitCode, logLines(t, client.LogPath))
	}
	if got := logLines(t, client.LogPath); !slices.Equal(got, []string{"stdout F " + pod.Hostname, "stdout F hello"}) {
		t.Errorf("client log %q, want its hostname and what the server served", got)
	}
	if got := logLines(t, server.LogPath); len(got) == 0 || got[0] != "stdout F "+pod.Hostname {
		t.Errorf("server log %q, want hostname %s first", got, pod.Hostname)
	}
	if err := e.rt.Signal(context.Background(), s.ID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	e.wait(s.ID)
	for _, id := range []string{s.ID, c.ID} {
		e.destroy(id)
	}
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, s.ID, c.ID)
}

func TestHostNetwork(t *testing.T) {
	e := newEnv(t)
	// The host's network namespace, not its interfaces: other tests add and
	// remove bridges and veths meanwhile. This thread's, not /proc/self's:
	// that is the main thread's, which a test's goroutine that entered
	// another namespace and ended locked may have left parked there.
	hostNS, err := os.Readlink("/proc/thread-self/ns/net")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name        string
		hostNetwork bool
		script      string
		want        []string
	}{
		{"host", true, "readlink /proc/self/ns/net", []string{hostNS}},
		{"pod", false, "ls /sys/class/net", []string{"lo"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := e.pod(tc.hostNetwork)
			e.sandbox(pod)
			c := e.container(pod, "ifs", tc.script)
			st := e.wait(e.start(pod, c).ID)
			var got []string
			for _, l := range logLines(t, c.LogPath) {
				got = append(got, strings.Fields(strings.TrimPrefix(l, "stdout F "))...)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("interfaces %q, want %q", got, tc.want)
			}
			e.destroy(st.ID)
			if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
				t.Fatal(err)
			}
			checkClean(t, e, pod.UID, st.ID)
		})
	}
}

func TestImageNotPresent(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	c := e.container(pod, "x", "true")
	c.Image = "docker.io/library/missing:1"
	_, err := e.rt.StartContainer(context.Background(), pod, c)
	if !errors.Is(err, podspec.ErrImageNotPresent) {
		t.Fatalf("Start = %v, want ErrImageNotPresent", err)
	}
	if l, err := e.rt.List(context.Background()); err != nil || len(l) != 0 {
		t.Errorf("List after a failed start = %v, %v; want nothing", l, err)
	}
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID)
}

// checkClean fails t if anything of pod uid or containers ids is left:
// mounts, cgroups, state or overlay dirs.
func checkClean(t *testing.T, e *env, uid string, ids ...string) {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mi), "\n") {
		if strings.Contains(l, e.cfg.RunDir) || strings.Contains(l, e.store.dir) {
			t.Errorf("mount left: %s", l)
		}
	}
	left := cgroupDirs(t, path.Join(e.cfg.CgroupRoot, "pod"+uid))
	paths := []string{filepath.Join(e.cfg.RunDir, podsDir, uid)}
	for _, id := range ids {
		paths = append(paths, filepath.Join(e.cfg.RunDir, containersDir, id),
			filepath.Join(e.cfg.RunDir, libcontainerDir, id), filepath.Join(e.store.dir, id))
	}
	for _, p := range append(left, paths...) {
		if _, err := os.Stat(p); err == nil {
			t.Errorf("left behind: %s", p)
		}
	}
	if uids, err := e.rt.ListSandboxes(context.Background()); err != nil || slices.Contains(uids, uid) {
		t.Errorf("ListSandboxes = %v, %v after removal", uids, err)
	}
}

// helperEnv makes the test binary a stand-in daemon that starts one container
// and then waits to be killed.
const helperEnv = "OCI_TEST_DAEMON"

type helperArgs struct {
	Cfg       Config // Images and Logger unset
	Lower     string
	StoreDir  string
	Pod       podspec.Pod
	Container podspec.Container
	// Stall makes the helper print the stalledMonitor it starts the
	// container with before it starts it; StopSpare SIGSTOPs that monitor
	// first, so that it never reads its go byte.
	Stall, StopSpare bool
}

// stalledMonitor is what a stalling helper prints.
type stalledMonitor struct {
	ID         string
	MonitorPid int
}

func runHelper() int {
	var a helperArgs
	if err := json.Unmarshal([]byte(os.Getenv(helperEnv)), &a); err != nil {
		return 2
	}
	a.Cfg.Images = overlayStore{lower: a.Lower, dir: a.StoreDir}
	rt, err := New(a.Cfg)
	if err != nil {
		return 3
	}
	ctx := context.Background()
	if err := rt.Recover(ctx); err != nil {
		return 3
	}
	rt.Start(ctx)
	if err := rt.CreateSandbox(ctx, &a.Pod); err != nil {
		os.Stderr.WriteString(err.Error())
		return 4
	}
	if a.Stall {
		pm := waitSpare(rt, 10*time.Second)
		if pm == nil {
			return 6
		}
		if a.StopSpare {
			_ = syscall.Kill(pm.m.pid, syscall.SIGSTOP)
		}
		_ = json.NewEncoder(os.Stdout).Encode(stalledMonitor{ID: pm.id, MonitorPid: pm.m.pid})
	}
	st, err := rt.StartContainer(ctx, &a.Pod, &a.Container)
	if err != nil {
		os.Stderr.WriteString(err.Error())
		return 5
	}
	_ = json.NewEncoder(os.Stdout).Encode(st)
	select {} // until killed
}

// startInDaemon starts c in a separate daemon process and kill -9s it once the
// container runs.
func startInDaemon(t *testing.T, e *env, pod *podspec.Pod, c *podspec.Container) podspec.ContainerStatus {
	t.Helper()
	args, err := json.Marshal(helperArgs{
		Cfg:   Config{RunDir: e.cfg.RunDir, RootDir: e.cfg.RootDir, CgroupRoot: e.cfg.CgroupRoot},
		Lower: e.store.lower, StoreDir: e.store.dir, Pod: *pod, Container: *c,
	})
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/proc/self/exe")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(args))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var st podspec.ContainerStatus
	if err := json.NewDecoder(out).Decode(&st); err != nil {
		_ = cmd.Process.Kill()
		t.Fatalf("daemon helper: %v (%v)", err, cmd.Wait())
	}
	_ = cmd.Process.Kill() // kill -9
	_ = cmd.Wait()
	return st
}

func TestContainerOutlivesDaemon(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	c := e.container(pod, "survivor",
		"echo before; while [ ! -e /tmp/go ]; do sleep 0.05; done; "+
			"i=0; while [ $i -lt 200 ]; do echo line$i; i=$((i+1)); done; echo last >&2; exit 5")
	started := startInDaemon(t, e, pod, c)
	if err := syscall.Kill(started.Pid, 0); err != nil {
		t.Fatalf("container pid %d gone after kill -9 of the daemon: %v", started.Pid, err)
	}

	b := e.newRuntime() // the next daemon
	list, err := b.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].ID != started.ID || list[0].State != podspec.StateRunning || list[0].Pid != started.Pid {
		t.Fatalf("List after restart = %+v, want %s running as pid %d", list, started.ID, started.Pid)
	}
	if got := list[0]; got.PodUID != pod.UID || got.Name != c.Name || got.Hash != c.Hash || got.LogPath != c.LogPath {
		t.Errorf("labels lost across restart: %+v", got)
	}
	if sbs, err := b.ListSandboxes(context.Background()); err != nil || !slices.Equal(sbs, []string{pod.UID}) {
		t.Errorf("ListSandboxes = %v, %v", sbs, err)
	}
	reportMonitorRSS(t, e, started.ID)

	// The container writes and exits while no daemon is waiting.
	_, _, merged := e.store.paths(started.ID)
	if err := os.WriteFile(filepath.Join(merged, "tmp", "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitPidExit(t, started.Pid, 10*time.Second)

	st := e.wait(started.ID)
	if st.ExitCode != 5 {
		t.Errorf("exit code %d, want 5", st.ExitCode)
	}
	want := []string{"stdout F before"}
	for i := range 200 {
		want = append(want, "stdout F line"+strconv.Itoa(i))
	}
	var stdout, stderr []string
	for _, l := range logLines(t, c.LogPath) {
		if strings.HasPrefix(l, "stdout ") {
			stdout = append(stdout, l)
		} else {
			stderr = append(stderr, l)
		}
	}
	if !slices.Equal(stdout, want) || !slices.Equal(stderr, []string{"stderr F last"}) {
		t.Errorf("log has %d stdout lines (want %d in order) and stderr %q (want last)", len(stdout), len(want), stderr)
	}
	if err := b.Destroy(context.Background(), st.ID); err != nil {
		t.Fatal(err)
	}
	if err := b.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, st.ID)
}

func TestMonitorKilledKillsContainer(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	c := e.container(pod, "orphan", "while :; do sleep 1; done")
	st := e.start(pod, c)
	var ms monitorState
	if err := readJSON(filepath.Join(e.rt.containerDir(st.ID), stateFile), &ms); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(ms.MonitorPid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	got := e.wait(st.ID)
	if got.ExitCode != 137 || !strings.Contains(got.Message, "monitor") {
		t.Errorf("after the monitor died: code %d message %q, want 137 naming the monitor", got.ExitCode, got.Message)
	}
	waitPidExit(t, st.Pid, 10*time.Second)
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, st.ID)
}

func reportMonitorRSS(t *testing.T, e *env, id string) {
	var ms monitorState
	if err := readJSON(filepath.Join(e.cfg.RunDir, containersDir, id, stateFile), &ms); err != nil {
		t.Fatal(err)
	}
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(ms.MonitorPid), "status"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "VmRSS:") || strings.HasPrefix(l, "RssAnon:") {
			t.Logf("monitor pid %d %s", ms.MonitorPid, strings.Join(strings.Fields(l), " "))
		}
	}
}

// A container whose process cannot be started (no such command, one that is
// not executable) is kept as containerd keeps it: exited with exit code 128,
// reason StartError and the real error as message, listed as such, its log
// file there, until Destroy removes every trace of it.
func TestStartErrorKeepsExitedContainer(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	ctx := context.Background()
	var ids []string
	for _, tc := range []struct {
		name    string
		command []string
		message string
	}{
		{"missing", []string{"/nope"}, `exec: "/nope": stat /nope: no such file or directory`},
		{"not-executable", []string{"/etc/hostname"}, "permission denied"},
		{"not-in-path", []string{"nope"}, `exec: "nope": executable file not found in $PATH`},
	} {
		c := e.container(pod, tc.name, "")
		c.Command = tc.command
		st, err := e.rt.StartContainer(ctx, pod, c)
		if !errors.Is(err, podspec.ErrStartFailed) {
			t.Fatalf("%s: Start = %v, want ErrStartFailed", tc.name, err)
		}
		if st.ID == "" || st.State != podspec.StateExited || st.ExitCode != 128 || st.Reason != reasonStartError ||
			!strings.Contains(st.Message, tc.message) || st.FinishedAt.IsZero() || st.PodUID != pod.UID || st.Name != tc.name {
			t.Errorf("%s: status = %+v, want exited 128 StartError with %q", tc.name, st, tc.message)
		}
		if got, err := e.rt.Wait(ctx, st.ID); err != nil || got.State != podspec.StateExited || got.ExitCode != 128 {
			t.Errorf("%s: Wait = %+v, %v", tc.name, got, err)
		}
		if _, err := os.Stat(c.LogPath); err != nil {
			t.Errorf("%s: log file: %v", tc.name, err)
		}
		t.Logf("%s: %s", tc.name, st.Message)
		ids = append(ids, st.ID)
	}
	l, err := e.rt.List(ctx)
	if err != nil || len(l) != len(ids) {
		t.Fatalf("List = %+v, %v; want the %d containers that failed to start", l, err, len(ids))
	}
	for _, st := range l {
		if st.State != podspec.StateExited || st.Reason != reasonStartError {
			t.Errorf("listed %s as %s %s", st.Name, st.State, st.Reason)
		}
	}
	for _, id := range ids {
		e.destroy(id)
	}
	if err := e.rt.RemoveSandbox(ctx, pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, ids...)
}

// A container whose libcontainer record no longer matches its init (here
// its start time is rewritten) is still stopped by Signal: through its
// monitor's record of the init, checked by parent, not by a bare pid.
func TestSignalWhenLibcontainerLostTrack(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	c := e.container(pod, "trap", "trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done")
	st := e.start(pod, c)
	waitLog(t, c.LogPath, "stdout F ready")
	p := filepath.Join(e.rt.libcontainerRoot(), st.ID, "state.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var state map[string]any
	if err := json.Unmarshal(b, &state); err != nil {
		t.Fatal(err)
	}
	if _, ok := state["init_process_start"]; !ok {
		t.Fatalf("libcontainer state has no init_process_start: %s", b)
	}
	state["init_process_start"] = 1
	if b, err = json.Marshal(state); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.Signal(context.Background(), st.ID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if got := e.wait(st.ID); got.ExitCode != 42 {
		t.Errorf("exit code %d after SIGTERM, want 42 from the trap", got.ExitCode)
	}
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
}

// A removal cut short (a daemon killed half-way through the state dir, here
// a mount in it that cannot go yet) leaves no record of the container
// without its exit: the next List would take it for a container whose
// monitor died, record a 137 it never had, and the agent would run it again
// (the chaos soak saw it). What is left is removed by a later List.
func TestRemovalCutShortLeavesNoExitlessRecord(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	c := e.container(pod, "done", "exit 0")
	st := e.wait(e.start(pod, c).ID)
	if st.ExitCode != 0 {
		t.Fatalf("exit code %d, want 0", st.ExitCode)
	}
	dir := filepath.Join(e.cfg.RunDir, containersDir, st.ID)
	busy := filepath.Join(dir, "zz-busy") // after exit.json and container.json
	if err := os.Mkdir(busy, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", busy, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	mounted := true
	unmount := func() {
		if mounted {
			mounted = false
			if err := unix.Unmount(busy, unix.MNT_DETACH); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(unmount)
	if err := e.rt.Destroy(context.Background(), st.ID); err == nil {
		t.Fatal("Destroy succeeded with a mount in the state dir")
	}
	// Where the mount went with its dir.
	if _, err := os.Stat(busy); errors.Is(err, fs.ErrNotExist) {
		busy = filepath.Join(dir+removingSuffix, "zz-busy")
	}
	list, err := e.rt.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, got := range list {
		if got.ID == st.ID {
			t.Errorf("listed after its removal was cut short: %+v (exit %d %q)", got.State, got.ExitCode, got.Message)
		}
	}
	unmount()
	if _, err := e.rt.List(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(e.cfg.RunDir, containersDir)); len(ents) > 0 {
		t.Errorf("left in the containers dir after a List: %v", ents)
	}
	e.destroy(st.ID) // what the agent does again: nothing left to do
	if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
		t.Fatal(err)
	}
	checkClean(t, e, pod.UID, st.ID)
}

// A monitor shows its own name where an operator looks (ps, top, pidof, the
// journal's _COMM), not the number of the memfd descriptor it was run from
// nor the "exe" of the C monitor's exec: the spare waiting for a container,
// and a container's monitor once it runs its C half.
func TestMonitorNamedInProcessList(t *testing.T) {
	e := newEnv(t)
	pod := e.pod(false)
	e.sandbox(pod)
	st := e.start(pod, e.container(pod, "named", "while :; do sleep 1; done"))
	defer func() {
		if err := e.rt.Signal(context.Background(), st.ID, syscall.SIGKILL); err != nil {
			t.Error(err)
		}
		e.wait(st.ID)
		e.destroy(st.ID)
		if err := e.rt.RemoveSandbox(context.Background(), pod.UID); err != nil {
			t.Error(err)
		}
		checkClean(t, e, pod.UID, st.ID)
	}()
	want := mon.Name[:15] // the kernel keeps 15 bytes of a name
	comm := func(pid int) string {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
		return strings.TrimSuffix(string(b), "\n")
	}
	var ms monitorState
	if err := readJSON(filepath.Join(e.rt.containerDir(st.ID), stateFile), &ms); err != nil {
		t.Fatal(err)
	}
	// The Go half is named too: the C half's exec names it "exe" again.
	poll(t, 10*time.Second, fmt.Sprintf("monitor %d did not exec its C half", ms.MonitorPid), func() bool {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ms.MonitorPid))
		return strings.Contains(string(b), "\x00"+mon.RunningArg+"\x00")
	})
	poll(t, 10*time.Second, fmt.Sprintf("running monitor %d not named %q", ms.MonitorPid, want), func() bool {
		return comm(ms.MonitorPid) == want
	})
	var spare int
	poll(t, 10*time.Second, "no spare monitor after a start", func() bool {
		e.rt.mu.Lock()
		defer e.rt.mu.Unlock()
		if e.rt.spare != nil {
			spare = e.rt.spare.m.pid
		}
		return spare != 0
	})
	poll(t, 10*time.Second, fmt.Sprintf("spare monitor %d not named %q", spare, want), func() bool {
		return comm(spare) == want
	})
}

// The last sandbox's removal retires the spare monitor, and one being started
// then: kubeadm reset stops and removes every pod through the CRI, and the
// daemon its CRI socket started stays; the spare that a container start
// (kube-apiserver or etcd restarting in between) had left waited for a
// container nothing would ask for, as long as that daemon lived.
func TestSpareRetiredWithTheLastSandbox(t *testing.T) {
	e := newEnv(t)
	e.rt.spareIdleForTest = 50 * time.Millisecond
	ctx := context.Background()
	a, b := e.pod(false), e.pod(false)
	e.sandbox(a)
	e.sandbox(b)
	st := e.start(a, e.container(a, "once", "true"))
	pm := spare(t, e.rt)
	e.wait(st.ID)
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(ctx, a.UID); err != nil {
		t.Fatal(err)
	}
	// b is still there, and its next container wants the spare.
	e.rt.mu.Lock()
	kept := e.rt.spare == pm
	e.rt.mu.Unlock()
	if !kept || pm.m.exited() {
		t.Fatalf("spare monitor %d given up while pod %s has a sandbox", pm.m.pid, b.UID)
	}
	if err := e.rt.RemoveSandbox(ctx, b.UID); err != nil {
		t.Fatal(err)
	}
	// Kept a while for a pod made again soon, then retired.
	if pm.m.exited() {
		t.Errorf("spare monitor %d retired at once with the last sandbox: a pod made again soon would start without it", pm.m.pid)
	}
	poll(t, 10*time.Second, "spare monitor retired after the last sandbox was removed", pm.m.exited)

	// A sandbox made within the idle time keeps the spare.
	d := e.pod(false)
	e.sandbox(d)
	st = e.start(d, e.container(d, "once", "true"))
	pm = spare(t, e.rt)
	e.wait(st.ID)
	e.destroy(st.ID)
	if err := e.rt.RemoveSandbox(ctx, d.UID); err != nil {
		t.Fatal(err)
	}
	d2 := e.pod(false)
	e.sandbox(d2)
	time.Sleep(4 * e.rt.spareIdleForTest) // past the idle time of d's removal
	if pm.m.exited() {
		t.Errorf("spare monitor %d retired while pod %s has a sandbox", pm.m.pid, d2.UID)
	}
	if err := e.rt.RemoveSandbox(ctx, d2.UID); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "spare monitor retired after the last sandbox was removed", pm.m.exited)

	// A spare being started as the last sandbox goes is not kept either.
	c := e.pod(false)
	e.sandbox(c)
	e.rt.refillSpare()
	if err := e.rt.RemoveSandbox(ctx, c.UID); err != nil {
		t.Fatal(err)
	}
	poll(t, 10*time.Second, "no monitor process left after the last sandbox was removed", func() bool {
		e.rt.mu.Lock()
		idle := !e.rt.refilling && e.rt.spare == nil
		e.rt.mu.Unlock()
		return idle && len(monitorProcs(t, e.cfg.RunDir)) == 0
	})
	checkClean(t, e, a.UID)
	checkClean(t, e, b.UID)
	checkClean(t, e, c.UID)
	checkClean(t, e, d.UID, st.ID)
	checkClean(t, e, d2.UID)
}

// monitorProcs are the pids of the monitors whose arguments name runDir.
func monitorProcs(t *testing.T, runDir string) []int {
	t.Helper()
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, dir := range dirs {
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err != nil || !strings.HasPrefix(string(cmdline), mon.Name+"\x00") || !strings.Contains(string(cmdline), "\x00"+runDir+"/") {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		pids = append(pids, pid)
	}
	return pids
}
