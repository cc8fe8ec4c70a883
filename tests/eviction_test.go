package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/server"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// Node pressure made real: the daemon's pods live under a cgroup with a small
// memory and pids limit that stands for the node (run's hidden, test-only
// --test-node-cgroup), or on a small loop-mounted filesystem that is
// its --root-dir.

// nodeCgroup makes a cgroupfs cgroup standing for the node, with memory and
// pids limits (0: none), removed at the end of the test even when it fails,
// after the daemon's own cleanup (registered later, run earlier).
func nodeCgroup(t *testing.T, memory int64, pids int) string {
	t.Helper()
	node := "/staticpodd-node-" + testdaemon.RandHex(4)
	t.Cleanup(func() { removeCgroupTree(t, node) })
	// hierarchy directory (v1: one per controller; v2: the one) → file, value
	limits := [][3]string{
		{"memory", "memory.limit_in_bytes", strconv.FormatInt(memory, 10)},
		{"pids", "pids.max", strconv.Itoa(pids)},
	}
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		limits = [][3]string{{"", "memory.max", strconv.FormatInt(memory, 10)}, {"", "pids.max", strconv.Itoa(pids)}}
	}
	for _, l := range limits {
		dir := filepath.Join("/sys/fs/cgroup", l[0], node)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if l[2] == "0" {
			continue
		}
		if err := os.WriteFile(filepath.Join(dir, l[1]), []byte(l[2]), 0o644); err != nil {
			t.Fatalf("limit the node cgroup: %v", err)
		}
	}
	return node
}

// removeCgroupTree removes cgroup p and what is under it in every hierarchy.
func removeCgroupTree(t *testing.T, p string) {
	ctrls, _ := os.ReadDir("/sys/fs/cgroup")
	roots := []string{"/sys/fs/cgroup"}
	for _, c := range ctrls {
		roots = append(roots, filepath.Join("/sys/fs/cgroup", c.Name()))
	}
	for _, root := range roots {
		var dirs []string
		filepath.WalkDir(filepath.Join(root, p), func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			if err := os.Remove(dirs[i]); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("remove node cgroup: %v", err)
			}
		}
	}
}

// pressureDaemon is a daemon whose pods live under node, with config added
// to its configuration file.
func pressureDaemon(t *testing.T, node, config string) *daemon {
	t.Helper()
	d := newDaemon(t)
	d.Cgroup = node + "/pods"
	b, err := os.ReadFile(d.Config)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "cgroupRoot:") {
			line = "cgroupRoot: " + d.Cgroup
		}
		out = append(out, line)
	}
	if err := os.WriteFile(d.Config, []byte(strings.Join(out, "\n")+config), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Args = append(d.Args, "--test-node-cgroup", node)
	return d
}

// summary is the daemon's /stats/summary.
func summary(d *daemon) server.StatsSummary {
	d.T.Helper()
	c := d.SocketClient()
	defer c.CloseIdleConnections() // a new client each time: leave no connection behind
	resp, err := c.Get("http://staticpodd/stats/summary")
	if err != nil {
		d.T.Fatalf("GET /stats/summary: %v", err)
	}
	defer resp.Body.Close()
	var s server.StatsSummary
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil {
		d.T.Fatalf("decode /stats/summary: %v", err)
	}
	return s
}

// condition is the node condition c as the daemon reports it.
func condition(d *daemon, c v1.NodeConditionType) v1.NodeCondition {
	for _, nc := range summary(d).Node.Conditions {
		if nc.Type == c {
			return nc
		}
	}
	d.T.Fatalf("no %s condition in /stats/summary", c)
	return v1.NodeCondition{}
}

// waitEvicted waits until pod name is Failed with reason Evicted.
func waitEvicted(d *daemon, name string, timeout time.Duration) *v1.Pod {
	d.T.Helper()
	var pod *v1.Pod
	d.Eventually(timeout, name+" evicted", func() error {
		pod = d.Pod(name)
		if pod == nil {
			return fmt.Errorf("no pod %s", name)
		}
		if pod.Status.Phase != v1.PodFailed || pod.Status.Reason != "Evicted" {
			return fmt.Errorf("phase %s reason %q", pod.Status.Phase, pod.Status.Reason)
		}
		return nil
	})
	return pod
}

// events is the daemon's events.
func events(d *daemon) []v1.Event {
	d.T.Helper()
	var list v1.EventList
	if err := json.Unmarshal([]byte(d.CLI("events", "-o", "json")), &list); err != nil {
		d.T.Fatal(err)
	}
	return list.Items
}

// evictedEvent is the Evicted event of pod name, if there is one.
func evictedEvent(d *daemon, name string) *v1.Event {
	for _, e := range events(d) {
		if e.Reason == "Evicted" && e.InvolvedObject.Name == name+"-"+d.Name {
			return &e
		}
	}
	return nil
}

// criticalPod is a Guaranteed system-node-critical pod, as kubeadm's
// control plane pods are.
func criticalPod(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  priorityClassName: system-node-critical
  terminationGracePeriodSeconds: 3
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    resources:
      requests: {cpu: 50m, memory: 32Mi}
      limits: {cpu: 50m, memory: 32Mi}
`, name)
}

// hogScript grows by 10 MiB every 0.1s (about 100 MB/s) up to chunks chunks,
// then holds it; it grows only on its first run (/s/grown), so the pod that
// comes back after an eviction stays small.
func hogScript(chunks int) string {
	return fmt.Sprintf(`trap 'exit 0' TERM
if [ -e /s/grown ]; then echo calm > /s/state; while true; do sleep 1 & wait $!; done; fi
touch /s/grown
a=$(head -c 10485760 /dev/zero | tr '\0' x)
i=0
while [ $i -lt %d ]; do eval "v$i=\$a"; i=$((i+1)); echo $i > /s/size; sleep 0.1; done
echo full > /s/state
while true; do sleep 1 & wait $!; done`, chunks)
}

// A BestEffort pod leaking memory beside a Guaranteed system-node-critical
// pod, on a node of 256 MiB with evictionHard memory.available 100Mi: the
// hog is evicted (the kubelet's reason and message), the critical pod is not
// touched, a BestEffort pod written meanwhile is refused, MemoryPressure shows
// in ps, /healthz and /stats/summary and clears after the transition period,
// and then both refused and evicted pods start again.
func TestEvictionMemoryHogEvictedCriticalUntouched(t *testing.T) {
	t.Parallel()
	node := nodeCgroup(t, 256<<20, 0)
	d := pressureDaemon(t, node, `evictionHard:
  memory.available: 100Mi
evictionPressureTransitionPeriod: 6s
`)
	notify, sock := newNotifySocket(t)
	d.Env = append(d.Env, "NOTIFY_SOCKET="+sock)
	d.Start()
	d.WriteManifest("cp.yaml", criticalPod("cp"))
	cp := d.WaitRunning("cp", 60*time.Second)
	cpID := cp.Status.ContainerStatuses[0].ContainerID

	state := filepath.Join(d.Dir, "hog")
	os.MkdirAll(state, 0o755)
	d.WriteManifest("hog.yaml", podWithDir("hog", state, hogScript(20), "terminationGracePeriodSeconds: 30"))
	t0 := time.Now()
	hog := waitEvicted(d, "hog", 90*time.Second)
	t.Logf("hog evicted %v after it was written", time.Since(t0))
	if want := "The node was low on resource: memory. Threshold quantity: 100Mi, available: "; !strings.HasPrefix(hog.Status.Message, want) ||
		!strings.Contains(hog.Status.Message, "Container main was using ") {
		t.Errorf("evicted with message %q, want the kubelet's", hog.Status.Message)
	}
	if b, _ := os.ReadFile(filepath.Join(state, "state")); string(b) == "full\n" {
		t.Log("the hog reached its full size before it was evicted")
	}
	if mp := condition(d, v1.NodeMemoryPressure); mp.Status != v1.ConditionTrue || mp.Reason != "KubeletHasInsufficientMemory" {
		t.Errorf("MemoryPressure %+v, want True right after the eviction", mp)
	}
	if out := d.CLI("ps"); !strings.Contains(out, "Node under pressure:\n  MemoryPressure") || !hasFields(out, "hog-"+d.Name, "Evicted") {
		t.Errorf("ps does not show the pressure and the evicted pod:\n%s", out)
	}
	c := d.SocketClient()
	defer c.CloseIdleConnections()
	resp, err := c.Get("http://staticpodd/healthz?verbose")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(b), "[-]memory-pressure failed since") || resp.StatusCode != 200 {
		t.Errorf("/healthz?verbose %d:\n%s", resp.StatusCode, b)
	}
	// systemd hears it: STATUS=... ; node has MemoryPressure.
	notify.next(t, "; node has MemoryPressure", 10*time.Second)
	// Admission under memory pressure: BestEffort refused, as the kubelet.
	d.WriteManifest("late.yaml", sleeper("late", ""))
	d.Eventually(30*time.Second, "late refused", func() error {
		p := d.Pod("late")
		if p == nil || p.Status.Phase != v1.PodFailed || p.Status.Message != "The node had condition: [MemoryPressure]. " {
			return fmt.Errorf("late: %+v", p)
		}
		return nil
	})

	// The critical pod never stopped.
	cp = d.Pod("cp")
	if cs := cp.Status.ContainerStatuses[0]; cs.ContainerID != cpID || cs.RestartCount != 0 || cs.State.Running == nil {
		t.Errorf("critical pod's container %+v, want %s running, never restarted", cs, cpID)
	}
	if e := evictedEvent(d, "cp"); e != nil {
		t.Errorf("critical pod evicted: %+v", e)
	}
	if e := evictedEvent(d, "hog"); e == nil || e.Type != v1.EventTypeWarning {
		t.Errorf("no Evicted warning event for the hog: %+v", e)
	}

	// Pressure gone: the condition clears after the transition period, and
	// after another one the pods come back.
	d.Eventually(60*time.Second, "MemoryPressure False", func() error {
		if c := condition(d, v1.NodeMemoryPressure); c.Status != v1.ConditionFalse {
			return fmt.Errorf("%s", c.Status)
		}
		return nil
	})
	t.Logf("MemoryPressure cleared %v after the hog was written", time.Since(t0))
	d.WaitRunning("hog", 60*time.Second)
	d.WaitRunning("late", 60*time.Second)
	t.Logf("hog back %v after it was written", time.Since(t0))
	waitContent(d, filepath.Join(state, "state"), "calm\n", 30*time.Second)
	if out := d.CLI("ps"); strings.Contains(out, "Node under pressure") {
		t.Errorf("ps still shows pressure:\n%s", out)
	}
}

// A soft threshold evicts only once it has been met for its grace period.
func TestEvictionSoftThresholdHonoursGracePeriod(t *testing.T) {
	t.Parallel()
	node := nodeCgroup(t, 256<<20, 0)
	d := pressureDaemon(t, node, `evictionHard:
  memory.available: 10Mi
evictionSoft:
  memory.available: 180Mi
evictionSoftGracePeriod:
  memory.available: 6s
evictionMaxPodGracePeriod: 2
evictionPressureTransitionPeriod: 60s
`)
	d.Start()
	state := filepath.Join(d.Dir, "hog")
	os.MkdirAll(state, 0o755)
	// 120 MiB and hold: above the soft threshold (76Mi used), far from the hard.
	d.WriteManifest("hog.yaml", podWithDir("hog", state, hogScript(12), "terminationGracePeriodSeconds: 30"))
	hog := waitEvicted(d, "hog", 90*time.Second)
	mp := condition(d, v1.NodeMemoryPressure)
	e := evictedEvent(d, "hog")
	if e == nil {
		t.Fatal("no Evicted event")
	}
	evictedAt := e.FirstTimestamp.Time
	// Timestamps are whole seconds: 6s of grace is at least 5s between them.
	if waited := evictedAt.Sub(mp.LastTransitionTime.Time); waited < 5*time.Second {
		t.Errorf("evicted %v after MemoryPressure began, want the 6s grace period", waited)
	}
	if !strings.HasPrefix(hog.Status.Message, "The node was low on resource: memory. Threshold quantity: 180Mi") {
		t.Errorf("message %q, want the soft threshold's", hog.Status.Message)
	}
	// The eviction's grace is evictionMaxPodGracePeriod.
	d.WaitLine(10*time.Second, "grace=2s")
}

// A fork bomb, bounded by the node's pids.max, is evicted for pid.available.
func TestEvictionForkBomb(t *testing.T) {
	t.Parallel()
	node := nodeCgroup(t, 0, 120)
	d := pressureDaemon(t, node, `evictionHard:
  pid.available: "40"
evictionPressureTransitionPeriod: 5s
`)
	d.Start()
	d.WriteManifest("cp.yaml", criticalPod("cp"))
	d.WaitRunning("cp", 60*time.Second)
	state := filepath.Join(d.Dir, "bomb")
	os.MkdirAll(state, 0o755)
	bomb := `trap 'exit 0' TERM
if [ -e /s/grown ]; then echo calm > /s/state; while true; do sleep 1 & wait $!; done; fi
touch /s/grown
i=0
while [ $i -lt 95 ]; do sleep 100000 & i=$((i+1)); done
echo forked > /s/state
wait`
	d.WriteManifest("bomb.yaml", podWithDir("bomb", state, bomb, ""))
	p := waitEvicted(d, "bomb", 90*time.Second)
	if !strings.HasPrefix(p.Status.Message, "The node was low on resource: pids. Threshold quantity: 40, available: ") {
		t.Errorf("message %q", p.Status.Message)
	}
	if c := d.Pod("cp").Status.ContainerStatuses[0]; c.RestartCount != 0 || c.State.Running == nil {
		t.Errorf("critical pod touched: %+v", c)
	}
	d.WaitRunning("bomb", 60*time.Second)
	waitContent(d, filepath.Join(state, "state"), "calm\n", 30*time.Second)
}

// available is what statfs says is free for dir's filesystem.
func available(t *testing.T, dir string) int64 {
	t.Helper()
	out, err := exec.Command("df", "-B1", "--output=avail", dir).Output()
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(out))
	n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// fill writes a file of n bytes of zeros at path, synced.
func fill(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := f.Write(buf[:k]); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// A disk filling up: node-level reclaim (a finished pod's dead container,
// then an image no manifest uses, but not one the import folder holds)
// relieves it with no eviction; filled again, with nothing left to reclaim,
// the BestEffort pod is evicted, never the critical one, and it comes back
// once the disk has room again.
func TestEvictionDiskReclaimBeforeEviction(t *testing.T) {
	t.Parallel()
	// The daemon's root dir (images, snapshots: nodefs and imagefs) on a
	// small filesystem of its own, unmounted after the daemon's cleanup.
	mnt := filepath.Join(t.TempDir(), "disk")
	testroot.LoopFS(t, mnt, 160<<20)
	d := newDaemon(t)
	d.RootDir = filepath.Join(mnt, "root")
	os.MkdirAll(filepath.Join(d.RootDir, "images", "import"), 0o700)
	b, _ := os.ReadFile(d.Config)
	os.WriteFile(d.Config, append(b, []byte(`evictionHard:
  nodefs.available: 40Mi
evictionMinimumReclaim:
  nodefs.available: 5Mi
evictionPressureTransitionPeriod: 5s
`)...), 0o644)
	d.CLI("images", "import", testdaemon.Image)
	unused := filepath.Join(d.Dir, "unused.tar")
	buildImage(t, unused, "-ref", "unused:latest", "-pad", strconv.Itoa(24<<20))
	d.CLI("images", "import", unused)
	// An image the import folder holds stays, used or not.
	buildImage(t, filepath.Join(d.RootDir, "images", "import", "kept.tar"), "-ref", "kept:latest", "-pad", strconv.Itoa(4<<20))
	d.Start()
	d.Eventually(30*time.Second, "kept imported", func() error {
		if !strings.Contains(d.CLI("images", "ls"), "kept") {
			return errors.New("not yet")
		}
		return nil
	})

	d.WriteManifest("cp.yaml", criticalPod("cp"))
	d.WriteManifest("done.yaml", `apiVersion: v1
kind: Pod
metadata: {name: done}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "head -c 16777216 /dev/zero > /tmp/layer && sync && echo wrote"]
`)
	d.WriteManifest("be.yaml", sleeper("be", ""))
	d.WaitRunning("cp", 60*time.Second)
	d.WaitRunning("be", 60*time.Second)
	d.Eventually(60*time.Second, "done succeeded", func() error {
		if p := d.Pod("done"); p == nil || p.Status.Phase != v1.PodSucceeded {
			return errors.New("not yet")
		}
		return nil
	})

	// Fill the disk to 30Mi free: under 40Mi; the 24Mi image and the 16Mi
	// layer are enough to get back above 40Mi+5Mi.
	fill(t, filepath.Join(mnt, "fill1"), available(t, mnt)-30<<20)
	d.Eventually(60*time.Second, "the unused image removed", func() error {
		if strings.Contains(d.CLI("images", "ls"), "unused") {
			return errors.New("still there")
		}
		return nil
	})
	d.Eventually(30*time.Second, "the dead container removed", func() error {
		if ents, _ := os.ReadDir(filepath.Join(d.RootDir, "images", "snapshots")); len(ents) != 2 {
			return fmt.Errorf("%d snapshots, want cp's and be's", len(ents))
		}
		return nil
	})
	if !strings.Contains(d.CLI("images", "ls"), "kept") {
		t.Error("the image of the import folder was removed")
	}
	if p := d.Pod("done"); p.Status.Phase != v1.PodSucceeded || p.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("done after reclaim: %s %+v, want Succeeded with its last state", p.Status.Phase, p.Status.ContainerStatuses)
	}
	for _, name := range []string{"cp", "be"} {
		if e := evictedEvent(d, name); e != nil {
			t.Errorf("%s evicted though reclaim was enough: %+v", name, e)
		}
	}
	d.WaitLine(10*time.Second, "able to reduce resource pressure without evicting pods")
	if a := available(t, mnt); a < 45<<20 {
		t.Errorf("%d bytes free after reclaim, want at least 45Mi", a)
	}

	// Filled again, nothing left to reclaim: the BestEffort pod goes.
	fill(t, filepath.Join(mnt, "fill2"), available(t, mnt)-30<<20)
	p := waitEvicted(d, "be", 90*time.Second)
	if !strings.HasPrefix(p.Status.Message, "The node was low on resource: ephemeral-storage.") {
		t.Errorf("message %q", p.Status.Message)
	}
	if c := d.Pod("cp").Status.ContainerStatuses[0]; c.RestartCount != 0 || c.State.Running == nil {
		t.Errorf("critical pod touched: %+v", c)
	}
	if dp := condition(d, v1.NodeDiskPressure); dp.Status != v1.ConditionTrue {
		t.Errorf("DiskPressure %+v", dp)
	}
	os.Remove(filepath.Join(mnt, "fill1"))
	os.Remove(filepath.Join(mnt, "fill2"))
	d.WaitRunning("be", 90*time.Second)
}

// waitContent waits until file holds want (what it held before may be
// anything: the first run's last word).
func waitContent(d *daemon, file, want string, timeout time.Duration) {
	d.T.Helper()
	d.Eventually(timeout, fmt.Sprintf("%s to hold %q", filepath.Base(file), want), func() error {
		if b, _ := os.ReadFile(file); string(b) != want {
			return fmt.Errorf("%q", b)
		}
		return nil
	})
}

func hasFields(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		ok := true
		for _, want := range fields {
			found := false
			for _, g := range f {
				if g == want {
					found = true
				}
			}
			ok = ok && found
		}
		if ok {
			return true
		}
	}
	return false
}

// A host that cannot run pods properly stops the daemon before any pod
// starts, one line per failed check; staticpodd check says the same and
// starts nothing.
func TestStartupChecksRefuseToStart(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("web.yaml", sleeper("web", ""))
	bad := filepath.Join(d.Dir, "bad.yaml")
	b, _ := os.ReadFile(d.Config)
	var lines []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "cgroupRoot:") {
			l = "cgroupRoot: /cgroup.procs/pods" // under a file: never writable
		}
		lines = append(lines, l)
	}
	os.WriteFile(bad, []byte(strings.Join(lines, "\n")+"cgroupDriver: systemd\n"), 0o644)

	out, err := d.CLIErr("check", "--config", bad)
	if err == nil {
		t.Fatalf("check passed:\n%s", out)
	}
	for _, want := range []string{
		`check failed: cgroup-driver: cgroupDriver "systemd" does not match this host: systemd is not its init system`,
		"check failed: cgroup-root: cgroupRoot /cgroup.procs/pods is not writable",
		"staticpodd: 2 start-up check(s) failed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
	if out := d.CLI("check", "--config", d.Config); !strings.Contains(out, "all start-up checks passed") {
		t.Errorf("check of the good config: %s", out)
	}

	cmd := exec.Command(testdaemon.Bin, "run", "--config", bad, "--hostname-override", d.Name,
		"--root-dir", d.RootDir, "--run-dir", d.RunDir)
	b, err = cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() == 0 {
		t.Fatalf("run with failing checks: %v\n%s", err, b)
	}
	if !strings.Contains(string(b), `msg="start-up check failed"`) || !strings.Contains(string(b), "2 start-up check(s) failed") {
		t.Errorf("run output:\n%s", b)
	}
	if ents, _ := os.ReadDir(filepath.Join(d.RunDir, "containers")); len(ents) != 0 {
		t.Errorf("a container was made before the checks: %v", ents)
	}
}
