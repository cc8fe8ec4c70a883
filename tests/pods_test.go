package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// podWithDir is a one-container busybox pod whose container runs the shell
// command cmd with the host directory dir at /s; extra holds more spec fields,
// one per line.
func podWithDir(name, dir, cmd, extra string) string {
	var spec strings.Builder
	for _, line := range strings.Split(extra, "\n") {
		if line != "" {
			spec.WriteString("  " + line + "\n")
		}
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
%s  volumes:
  - name: s
    hostPath: {path: %s}
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", %q]
    volumeMounts:
    - {name: s, mountPath: /s}
`, name, spec.String(), dir, cmd)
}

func sleeper(name, extra string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
%s`, name, extra)
}

// containerPID is the host PID of the init of the pod's container name.
func containerPID(d *daemon, pod *v1.Pod, name string) int {
	d.T.Helper()
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.Name == name {
			return hostPID(d.T, d.Cgroup, cs.ContainerID)
		}
	}
	d.T.Fatalf("pod %s has no container %s", pod.Name, name)
	return 0
}

// hostPID finds the host PID of a container's init: the process in the
// cgroup named after the container, under the daemon's cgroupRoot, whose parent
// (the monitor) is outside it, the oldest of them: a process exec'd into the
// container (an exec probe's, a hook's) has its parent outside too. (Not the
// lowest PID: PIDs wrap around.)
func hostPID(t *testing.T, cgroupRoot, containerID string) int {
	t.Helper()
	id := strings.TrimPrefix(containerID, "staticpodd://")
	if id == "" {
		t.Fatal("container has no ID")
	}
	var pid int
	filepath.WalkDir(filepath.Join("/sys/fs/cgroup/pids", cgroupRoot), func(p string, de os.DirEntry, err error) error {
		if err != nil || pid != 0 || !de.IsDir() || !strings.Contains(filepath.Base(p), id) {
			return nil
		}
		b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		in := map[int]bool{}
		for _, f := range strings.Fields(string(b)) {
			if n, _ := strconv.Atoi(f); n > 0 {
				in[n] = true
			}
		}
		var oldest uint64
		for n := range in {
			if in[ppid(n)] {
				continue
			}
			if start, ok := startTime(n); ok && (pid == 0 || start < oldest) {
				pid, oldest = n, start
			}
		}
		return filepath.SkipAll
	})
	if pid == 0 {
		t.Fatalf("no process found for container %s", id)
	}
	return pid
}

// A manifest dropped into the directory becomes a running container, visible on
// the read-only port with the kubelet's name, UID annotations and status.
func TestManifestAppearsRunsContainer(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("sleeper.yaml", sleeper("sleeper", ""))
	pod := d.WaitRunning("sleeper", 30*time.Second)

	if pod.Namespace != "default" {
		t.Errorf("namespace = %q, want default", pod.Namespace)
	}
	if pod.Annotations["kubernetes.io/config.source"] != "file" {
		t.Errorf("config.source = %q, want file", pod.Annotations["kubernetes.io/config.source"])
	}
	if h := pod.Annotations["kubernetes.io/config.hash"]; h == "" || h != string(pod.UID) {
		t.Errorf("config.hash = %q, UID = %q: want equal and set", h, pod.UID)
	}
	if pod.Spec.NodeName != d.Name {
		t.Errorf("spec.nodeName = %q, want %q", pod.Spec.NodeName, d.Name)
	}
	for k := range pod.Annotations {
		if strings.HasPrefix(k, "staticpodd.io/") {
			t.Errorf("internal annotation %s shown on /pods", k)
		}
	}
	pid := containerPID(d, pod, "main")
	if !procAlive(pid) {
		t.Fatalf("container process %d is not alive", pid)
	}
	cs := pod.Status.ContainerStatuses[0]
	if cs.RestartCount != 0 || !cs.Ready {
		t.Errorf("container status = %+v, want ready with 0 restarts", cs)
	}
	// The image a pod uses cannot be removed from under it.
	if out, err := d.CLIErr("images", "rm", "busybox"); err == nil || !strings.Contains(out, "used by a container") {
		t.Errorf("images rm of an image in use: %v\n%s", err, out)
	}
	if out := d.CLI("images", "ls"); !strings.Contains(out, "docker.io/library/busybox:latest") {
		t.Errorf("image gone after a refused rm:\n%s", out)
	}
	// Its log is in the CRI format under podLogsDir/<ns>_<pod>_<uid>/<container>/0.log.
	d.WriteManifest("echo.yaml", `apiVersion: v1
kind: Pod
metadata: {name: echo}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: say
    image: busybox
    command: ["sh", "-c", "echo hello out; echo hello err >&2; exec sleep 1000"]
`)
	echo := d.WaitRunning("echo", 30*time.Second)
	logFile := filepath.Join(d.LogsDir, fmt.Sprintf("default_%s_%s", echo.Name, echo.UID), "say", "0.log")
	d.Eventually(10*time.Second, "both log lines", func() error {
		b, err := os.ReadFile(logFile)
		if err != nil {
			return err
		}
		s := string(b)
		if !strings.Contains(s, " stdout F hello out\n") || !strings.Contains(s, " stderr F hello err\n") {
			return fmt.Errorf("log is %q", s)
		}
		return nil
	})
	if out := d.CLI("logs", "echo"); out != "hello out\nhello err\n" && out != "hello err\nhello out\n" {
		t.Errorf("staticpodd logs echo = %q", out)
	}
}

// Editing a manifest never runs two generations at once: the old container has
// exited before the new one starts. Meanwhile ps shows the old generation
// Terminating beside the new one, which waits.
func TestEditStopsOldBeforeNew(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	shared := filepath.Join(d.Dir, "shared")
	os.MkdirAll(shared, 0o755)
	events := filepath.Join(shared, "events")
	gen := func(n int) string { return generation(shared, n, 30) }
	os.WriteFile(filepath.Join(shared, "stop-2"), nil, 0o644) // the new generation stops at once
	d.WriteManifest("gen.yaml", gen(1))
	first := d.WaitRunning("gen", 30*time.Second)
	waitFile(d, events, "start 1\n", 30*time.Second)
	oldPID := containerPID(d, first, "main")

	d.WriteManifest("gen.yaml", gen(2))
	d.Eventually(30*time.Second, "ps shows the old generation Terminating beside the new one", func() error {
		out, _ := d.CLIErr("ps")
		var states []string
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) >= 4 && f[1] == "gen-"+d.Name {
				states = append(states, f[3])
			}
		}
		if strings.Join(states, " ") != "Terminating ContainerCreating" {
			return fmt.Errorf("ps:\n%s", out)
		}
		return nil
	})
	pods := d.Pods()
	if len(pods) != 2 || pods[0].UID != first.UID || pods[0].DeletionTimestamp == nil || pods[1].UID == first.UID {
		t.Errorf("/pods during the edit: %d pods, want the old generation with a deletionTimestamp, then the new one", len(pods))
	}
	os.WriteFile(filepath.Join(shared, "stop-1"), nil, 0o644)
	waitFile(d, events, "start 1\nterm 1\nstop 1\nstart 2\n", 30*time.Second)
	if procAlive(oldPID) {
		t.Fatalf("old container process %d still alive", oldPID)
	}
	second := d.WaitRunning("gen", 10*time.Second)
	if second.UID == first.UID {
		t.Errorf("edited manifest kept UID %s", first.UID)
	}
	if n := len(d.Pods()); n != 1 {
		t.Errorf("%d pods once the old generation is gone, want 1", n)
	}
}

// A generation the daemon was stopping when it was killed, whose manifest is
// gone when the next daemon starts and then comes back edited, is stopped
// before the new generation starts: never two generations of a pod at once.
func TestStoppingGenerationAcrossDaemonRestart(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	shared := filepath.Join(d.Dir, "shared")
	os.MkdirAll(shared, 0o755)
	events := filepath.Join(shared, "events")
	gen := func(n int) string { return generation(shared, n, 60) }
	os.WriteFile(filepath.Join(shared, "stop-2"), nil, 0o644) // the new generation stops at once
	d.WriteManifest("gen.yaml", gen(1))
	first := d.WaitRunning("gen", 30*time.Second)
	waitFile(d, events, "start 1\n", 30*time.Second)
	oldPID := containerPID(d, first, "main")

	d.RemoveManifest("gen.yaml")
	waitFile(d, events, "start 1\nterm 1\n", 30*time.Second)
	d.Kill9()
	d.Start() // the manifest is gone: the old generation is still to stop
	d.Eventually(30*time.Second, "the new daemon lists the old generation Terminating", func() error {
		if p := d.Pod("gen"); p == nil || p.UID != first.UID || p.DeletionTimestamp == nil {
			return fmt.Errorf("pod gen: %+v", p)
		}
		return nil
	})
	d.WriteManifest("gen.yaml", gen(2))
	d.WaitLine(30*time.Second, "new pod generation; it starts once the previous one has stopped")
	if b, _ := os.ReadFile(events); strings.Contains(string(b), "start 2") {
		t.Fatalf("the new generation started while the old one still ran: %q", b)
	}
	if !procAlive(oldPID) {
		t.Fatalf("old container process %d is gone before its go-ahead", oldPID)
	}
	os.WriteFile(filepath.Join(shared, "stop-1"), nil, 0o644)
	d.Eventually(30*time.Second, "the old generation stops, then the new one starts", func() error {
		b, _ := os.ReadFile(events)
		s := string(b)
		stop, start := strings.Index(s, "stop 1\n"), strings.Index(s, "start 2\n")
		if start >= 0 && (stop < 0 || start < stop) {
			t.Fatalf("events %q: the new generation started before the old one stopped", s)
		}
		if start < 0 {
			return fmt.Errorf("events %q", s)
		}
		return nil
	})
	if second := d.WaitRunning("gen", 10*time.Second); second.UID == first.UID {
		t.Errorf("edited manifest kept UID %s", first.UID)
	}
}

// generation is generation n of pod "gen", with the directory shared at /s:
// it says "start N" in /s/events once its TERM trap is in place, "term N" on
// SIGTERM, and then waits for the test's go-ahead (/s/stop-N) before it says
// "stop N" and exits.
func generation(shared string, n, grace int) string {
	return podWithDir("gen", shared, fmt.Sprintf("trap 'echo term %d >> /s/events; until [ -e /s/stop-%d ]; do sleep 0.1; done; echo stop %d >> /s/events; exit 0' TERM; "+
		"echo start %d >> /s/events; while true; do sleep 1 & wait $!; done", n, n, n, n),
		fmt.Sprintf("terminationGracePeriodSeconds: %d", grace))
}

// waitFile waits until file holds want; any other content than a prefix of
// it fails the test at once.
func waitFile(d *daemon, file, want string, timeout time.Duration) {
	d.T.Helper()
	d.Eventually(timeout, fmt.Sprintf("%s to hold %q", filepath.Base(file), want), func() error {
		b, _ := os.ReadFile(file)
		if !strings.HasPrefix(want, string(b)) {
			d.T.Fatalf("%s = %q, want %q", file, b, want)
		}
		if string(b) != want {
			return fmt.Errorf("%q", b)
		}
		return nil
	})
}

// waitTrapped waits until the init process of a container catches SIGTERM:
// its shell has installed its trap, so a stop from now on is graceful (PID 1
// of a PID namespace ignores a signal it has no handler for).
func waitTrapped(d *daemon, pod *v1.Pod, container string) {
	d.T.Helper()
	waitCatches(d, pod, container, syscall.SIGTERM)
}

// waitCatches waits until the init process of a container catches sig.
func waitCatches(d *daemon, pod *v1.Pod, container string, sig syscall.Signal) {
	d.T.Helper()
	pid := containerPID(d, pod, container)
	d.Eventually(30*time.Second, fmt.Sprintf("%s traps %v", container, sig), func() error {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			return err
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "SigCgt:"); ok {
				mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
				if err != nil {
					return err
				}
				if mask&(1<<(uint(sig)-1)) == 0 {
					return fmt.Errorf("SigCgt %s", strings.TrimSpace(v))
				}
				return nil
			}
		}
		return fmt.Errorf("no SigCgt in /proc/%d/status", pid)
	})
}

// Deleting a manifest stops the pod gracefully and leaves nothing behind.
func TestDeleteLeavesNothing(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("gone.yaml", sleeper("gone", `    resources:
      limits: {memory: 64Mi, cpu: 200m}
  volumes:
  - name: scratch
    emptyDir: {}
`))
	pod := d.WaitRunning("gone", 30*time.Second)
	pid := containerPID(d, pod, "main")
	waitTrapped(d, pod, "main")
	// The limits are the container's cgroup limits.
	cg := strings.TrimPrefix(pod.Status.ContainerStatuses[0].ContainerID, "staticpodd://")
	dir := filepath.Join(d.Cgroup, "pod"+string(pod.UID), cg)
	for file, want := range map[string]string{
		"/sys/fs/cgroup/memory" + dir + "/memory.limit_in_bytes": "67108864",
		"/sys/fs/cgroup/cpu" + dir + "/cpu.cfs_quota_us":         "20000",
		"/sys/fs/cgroup/pids" + filepath.Dir(dir) + "/pids.max":  "100", // podPidsLimit
		// The pod cgroup's own limits, as the kubelet's ResourceConfigForPod
		// sets them for a Guaranteed pod: the sums of its containers'.
		"/sys/fs/cgroup/memory" + filepath.Dir(dir) + "/memory.limit_in_bytes": "67108864",
		"/sys/fs/cgroup/cpu" + filepath.Dir(dir) + "/cpu.cfs_quota_us":         "20000",
		"/sys/fs/cgroup/cpu" + filepath.Dir(dir) + "/cpu.shares":               "204",
	} {
		if b, err := os.ReadFile(file); err != nil || strings.TrimSpace(string(b)) != want {
			t.Errorf("%s = %q (%v), want %s", file, b, err, want)
		}
	}
	d.RemoveManifest("gone.yaml")
	d.Eventually(30*time.Second, "the pod is gone", func() error {
		if d.Pod("gone") != nil {
			return fmt.Errorf("still listed")
		}
		return nil
	})
	if procAlive(pid) {
		t.Errorf("container process %d still alive", pid)
	}
	d.AssertNoLeaks()
	logDir := filepath.Join(d.LogsDir, fmt.Sprintf("default_%s_%s", pod.Name, pod.UID))
	if _, err := os.Stat(logDir); !os.IsNotExist(err) {
		t.Errorf("pod log directory %s left behind (err %v)", logDir, err)
	}
}

// A crashing container restarts with the kubelet's growing back-off and a
// growing restartCount, and reports CrashLoopBackOff while it waits.
func TestCrashLoopBackOff(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	stamps := filepath.Join(d.Dir, "stamps")
	os.MkdirAll(stamps, 0o755)
	d.WriteManifest("crash.yaml", podWithDir("crash", stamps, "date +%s >> /s/starts; echo run $(wc -l < /s/starts); exit 3", ""))
	var starts []float64
	sawBackOff := false
	d.Eventually(60*time.Second, "four starts", func() error {
		if p := d.Pod("crash"); p != nil && len(p.Status.ContainerStatuses) == 1 {
			cs := p.Status.ContainerStatuses[0]
			if w := cs.State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
				sawBackOff = true
				if cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 3 {
					t.Errorf("lastState = %+v, want terminated with exit code 3", cs.LastTerminationState)
				}
			}
		}
		b, _ := os.ReadFile(filepath.Join(stamps, "starts"))
		starts = starts[:0]
		for _, f := range strings.Fields(string(b)) {
			v, _ := strconv.ParseFloat(f, 64)
			starts = append(starts, v)
		}
		if len(starts) < 4 {
			return fmt.Errorf("%d starts", len(starts))
		}
		return nil
	})
	if !sawBackOff {
		t.Error("never saw waiting reason CrashLoopBackOff")
	}
	// The kubelet restarts at once the first time, then after 10s, then 20s
	// (busybox date has whole seconds).
	gaps := []float64{starts[1] - starts[0], starts[2] - starts[1], starts[3] - starts[2]}
	if gaps[0] > 2 || gaps[1] < 9 || gaps[1] > 13 || gaps[2] < 19 || gaps[2] > 24 {
		t.Errorf("restart gaps = %.1fs, %.1fs, %.1fs; want about 0, 10, 20", gaps[0], gaps[1], gaps[2])
	}
	d.Eventually(10*time.Second, "restartCount 3", func() error {
		p := d.Pod("crash")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("no status")
		}
		if rc := p.Status.ContainerStatuses[0].RestartCount; rc < 3 {
			return fmt.Errorf("restartCount %d", rc)
		}
		return nil
	})
	// Waiting out its 40s back-off after run 4, both logs and logs --previous
	// show run 4, the last that ended, as the kubelet's
	// validateContainerLogStatus picks it (lastState).
	d.Eventually(10*time.Second, "CrashLoopBackOff after run 4", func() error {
		cs := d.Pod("crash").Status.ContainerStatuses[0]
		if w := cs.State.Waiting; cs.RestartCount != 3 || w == nil || w.Reason != "CrashLoopBackOff" {
			return fmt.Errorf("restartCount %d, state %+v", cs.RestartCount, cs.State)
		}
		return nil
	})
	cur, prev := d.CLI("logs", "crash"), d.CLI("logs", "crash", "--previous")
	if cur != "run 4\n" || prev != "run 4\n" {
		t.Errorf("in CrashLoopBackOff after run 4: logs = %q, logs --previous = %q; want \"run 4\" for both, as the kubelet", cur, prev)
	}
	// As the kubelet, only those two runs keep their log files.
	p := d.Pod("crash")
	files, _ := filepath.Glob(filepath.Join(d.LogsDir, fmt.Sprintf("default_%s_%s", p.Name, p.UID), "main", "*.log"))
	if len(files) != 2 {
		t.Errorf("log files %v, want only the current and previous runs'", files)
	}
}

// kill -9 of the daemon restarts nothing: the next daemon adopts the same
// processes, keeps restartCount, and sees exits that happened while it was down.
func TestDaemonKill9AdoptsContainers(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("keep.yaml", sleeper("keep", ""))
	d.WriteManifest("later.yaml", `apiVersion: v1
kind: Pod
metadata: {name: later}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "read x < /dev/null; sleep 4; echo while-down; exit 7"]
`)
	once := filepath.Join(d.Dir, "once")
	os.MkdirAll(once, 0o755)
	d.WriteManifest("once.yaml", podWithDir("once", once,
		"[ -f /s/ran ] || { touch /s/ran; exit 1; }; trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done",
		"terminationGracePeriodSeconds: 2\nrestartPolicy: OnFailure"))
	keep := d.WaitRunning("keep", 30*time.Second)
	laterPID := containerPID(d, d.WaitRunning("later", 30*time.Second), "main")
	var oncePID int
	d.Eventually(30*time.Second, "once restarted once and running", func() error {
		p := d.Pod("once")
		if p == nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].RestartCount != 1 ||
			p.Status.ContainerStatuses[0].State.Running == nil {
			return fmt.Errorf("not yet: %+v", p)
		}
		oncePID = containerPID(d, p, "main")
		return nil
	})
	pid := containerPID(d, keep, "main")
	uid := keep.UID

	d.Kill9()
	// "later" exits while no daemon runs (its monitor records it).
	d.Eventually(30*time.Second, "later's container exited while the daemon is down", func() error {
		if procAlive(laterPID) {
			return errStill
		}
		return nil
	})
	if !procAlive(pid) {
		t.Fatalf("container %d died with the daemon", pid)
	}
	d.Start()
	after := d.WaitRunning("keep", 30*time.Second)
	if got := containerPID(d, after, "main"); got != pid {
		t.Errorf("container PID after restart = %d, want %d (adopted, not restarted)", got, pid)
	}
	if after.UID != uid {
		t.Errorf("UID changed across daemon restart: %s -> %s", uid, after.UID)
	}
	if rc := after.Status.ContainerStatuses[0].RestartCount; rc != 0 {
		t.Errorf("restartCount = %d after daemon restart, want 0", rc)
	}
	onceAfter := d.WaitRunning("once", 30*time.Second)
	if rc := onceAfter.Status.ContainerStatuses[0].RestartCount; rc != 1 {
		t.Errorf("restartCount of a container restarted once = %d after the daemon's restart, want 1", rc)
	}
	if got := containerPID(d, onceAfter, "main"); got != oncePID {
		t.Errorf("once's container PID %d -> %d across the daemon's restart", oncePID, got)
	}
	d.Eventually(20*time.Second, "the exit while down is recorded", func() error {
		p := d.Pod("later")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("no pod")
		}
		term := p.Status.ContainerStatuses[0].State.Terminated
		if term == nil || term.ExitCode != 7 {
			return fmt.Errorf("state %+v, want terminated with exit code 7", p.Status.ContainerStatuses[0].State)
		}
		if p.Status.Phase != v1.PodFailed {
			return fmt.Errorf("phase %s, want Failed", p.Status.Phase)
		}
		return nil
	})
	later := d.Pod("later")
	logFile := filepath.Join(d.LogsDir, fmt.Sprintf("default_%s_%s", later.Name, later.UID), "main", "0.log")
	if b, err := os.ReadFile(logFile); err != nil || !strings.Contains(string(b), " stdout F while-down\n") {
		t.Errorf("line written while the daemon was down is missing from %s: %q %v", logFile, b, err)
	}
}

// A broken manifest beside a good one: the good pod runs untouched and the error
// names the file and the reason.
func TestBrokenManifestBesideGoodOne(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	metrics := newNodeMetrics(t, d)
	d.Start()
	d.WriteManifest("good.yaml", sleeper("good", ""))
	good := d.WaitRunning("good", 30*time.Second)
	pid := containerPID(d, good, "main")

	d.WriteManifest("broken.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: broken}\nspec:\n  containers:\n  - name: x\n    image: [\n")
	d.WriteManifest("invalid.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: Invalid_Name}\nspec:\n  containers: []\n")
	d.Eventually(15*time.Second, "ps names the broken files", func() error {
		out, _ := d.CLIErr("ps")
		if !strings.Contains(out, "broken.yaml") || !strings.Contains(out, "invalid.yaml") {
			return fmt.Errorf("ps output:\n%s", out)
		}
		return nil
	})
	// The agent has the broken files (ps names them): the good pod's worker
	// syncs once more at least, and leaves it alone.
	undisturbed := func() error {
		p := d.Pod("good")
		if p == nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil || !procAlive(pid) {
			return fmt.Errorf("good pod disturbed: listed %v, container %d alive %v", p != nil, pid, procAlive(pid))
		}
		return nil
	}
	metrics.await("pod syncs", podSyncs, 2, 30*time.Second, undisturbed)
	after := d.WaitRunning("good", 5*time.Second)
	if got := containerPID(d, after, "main"); got != pid || after.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("good pod disturbed: pid %d -> %d, restarts %d", pid, got, after.Status.ContainerStatuses[0].RestartCount)
	}
	if n := len(d.Pods()); n != 1 {
		t.Errorf("%d pods, want only the good one", n)
	}
	// validate runs the daemon's parser: it names the file and the reason.
	out, err := d.CLIErr("validate", filepath.Join(d.Manifests, "broken.yaml"), filepath.Join(d.Manifests, "invalid.yaml"))
	if err == nil {
		t.Errorf("validate of broken manifests exited 0:\n%s", out)
	}
	for _, want := range []string{"broken.yaml: not YAML or JSON", "invalid.yaml", "metadata.name", "spec.containers: Required value: at least one container is required"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
	if out, err := d.CLIErr("validate", filepath.Join(d.Manifests, "good.yaml")); err != nil {
		t.Errorf("validate of a good manifest failed: %v\n%s", err, out)
	}

	// The good manifest turns invalid: its last good pod keeps running, and
	// ps says why the file is not used.
	d.WriteManifest("good.yaml", "apiVersion: v1\nkind: Pod\nmetadata: {name: good}\nspec:\n  containers:\n  - name: main\n")
	d.Eventually(15*time.Second, "ps names good.yaml", func() error {
		out, _ := d.CLIErr("ps")
		if !strings.Contains(out, "good.yaml") || !strings.Contains(out, "image") {
			return fmt.Errorf("ps output:\n%s", out)
		}
		return nil
	})
	metrics.await("pod syncs", podSyncs, 2, 30*time.Second, undisturbed)
	kept := d.WaitRunning("good", 5*time.Second)
	if got := containerPID(d, kept, "main"); got != pid {
		t.Errorf("the last good pod was disturbed when its manifest turned invalid: pid %d -> %d", pid, got)
	}
}

// A corrupt image tarball is refused with a clear error and the store is as it was.
func TestCorruptImageRefused(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	before := d.CLI("images", "ls")
	beforeTree := tree(t, filepath.Join(d.RootDir, "images"))
	good, err := os.ReadFile(testdaemon.Image)
	if err != nil {
		t.Fatal(err)
	}
	truncated := filepath.Join(d.Dir, "truncated.tar")
	os.WriteFile(truncated, good[:len(good)/2], 0o644)
	garbage := filepath.Join(d.Dir, "garbage.tar")
	os.WriteFile(garbage, []byte("this is not an image archive\n"), 0o644)
	for _, f := range []string{truncated, garbage} {
		out, err := d.CLIErr("images", "import", f)
		if err == nil {
			t.Errorf("import of %s succeeded:\n%s", f, out)
		}
		if !strings.Contains(out, filepath.Base(f)) {
			t.Errorf("error does not name the file %s:\n%s", f, out)
		}
	}
	if after := d.CLI("images", "ls"); after != before {
		t.Errorf("store changed by a refused import:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if after := tree(t, filepath.Join(d.RootDir, "images")); after != beforeTree {
		t.Errorf("store files changed by a refused import:\nbefore:\n%s\nafter:\n%s", beforeTree, after)
	}
}

// tree lists every file under dir with its size and modification time, and the
// content of index.json: what a refused import must leave as it was. The
// directories' own times are left out (staging happens in tmp/).
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if de.IsDir() {
			fmt.Fprintf(&b, "%s/\n", strings.TrimPrefix(p, dir))
			return nil
		}
		info, err := de.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %s\n", strings.TrimPrefix(p, dir), info.Size(), info.ModTime())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	index, _ := os.ReadFile(filepath.Join(dir, "index.json"))
	return b.String() + string(index)
}

// A second daemon on the same --run-dir refuses to start and touches nothing.
func TestSecondDaemonRefused(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("one.yaml", sleeper("one", ""))
	d.Start()
	pod := d.WaitRunning("one", 30*time.Second)
	pid := containerPID(d, pod, "main")
	out, err := exec.Command(testdaemon.Bin, "run", "--config", d.Config, "--hostname-override", d.Name,
		"--root-dir", d.RootDir, "--run-dir", d.RunDir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "another staticpodd") {
		t.Fatalf("second daemon: %v\n%s", err, out)
	}
	after := d.WaitRunning("one", 5*time.Second)
	if got := containerPID(d, after, "main"); got != pid {
		t.Errorf("container %d replaced by %d", pid, got)
	}
}

// ppid returns the parent of pid, or 0.
// startTime is when process pid started, in clock ticks after boot
// (/proc/<pid>/stat's 22nd field); false when it is gone.
func startTime(pid int) (uint64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:]) // from the 3rd field on
	if len(f) < 20 {
		return 0, false
	}
	n, err := strconv.ParseUint(f[19], 10, 64)
	return n, err == nil
}

func ppid(pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "PPid:"); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n
		}
	}
	return 0
}
