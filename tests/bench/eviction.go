package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The eviction benchmarks: how long from memory.available crossing its
// threshold to the eviction starting, with the memory threshold notifier and
// with the 10 s housekeeping poll alone (the kubelet's default, whose
// kernelMemcgNotification is off); and what the eviction manager's checks
// cost an idle daemon.

// evictionNode is the cgroup standing for the node: 512 MiB.
const (
	evictionNode      = "/staticpodd-bench-evict-node"
	evictionNodeBytes = 512 << 20
	evictionThreshold = 200 << 20 // evictionHard memory.available
)

// hogPod leaks 10 MiB every 0.1 s, about 100 MB/s, up to 400 MiB, and holds it.
func hogPod(i int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hog-%d}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command:
    - sh
    - -c
    - |
      trap 'exit 0' TERM
      a=$(head -c 10485760 /dev/zero | tr '\0' x)
      i=0
      while [ $i -lt 40 ]; do eval "v$i=\$a"; i=$((i+1)); sleep 0.1; done
      while true; do sleep 1 & wait $!; done
`, i)
}

// evictDaemon is a daemon of the eviction benchmark.
type evictDaemon struct {
	cmd       *exec.Cmd
	logs      *syncBuf
	dir       string
	manifests string
	runDir    string
	pd        *probeDaemon
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// startEvictDaemon starts a daemon with the extra config and environment;
// node, when set, is its test-only node cgroup and the parent of its pods.
func startEvictDaemon(bin, image, node, extraCfg string, args ...string) (*evictDaemon, error) {
	dir, err := os.MkdirTemp("", "staticpodd-bench-evict-")
	if err != nil {
		return nil, err
	}
	d := &evictDaemon{logs: &syncBuf{}, dir: dir, manifests: filepath.Join(dir, "manifests"),
		runDir: filepath.Join("/run", filepath.Base(dir))}
	os.MkdirAll(d.manifests, 0o755)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cgroupRoot := "/staticpodd-bench-evict"
	if node != "" {
		cgroupRoot = node + "/pods"
		args = append(args, "--test-node-cgroup", node)
	}
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
address: 127.0.0.1
readOnlyPort: %d
podLogsDir: %s
cgroupRoot: %s
%s`, d.manifests, port, filepath.Join(dir, "logs"), cgroupRoot, extraCfg)), 0o644)
	common := []string{"--root-dir", filepath.Join(dir, "root"), "--run-dir", d.runDir}
	if out, err := exec.Command(bin, append([]string{"images", "import", image}, common...)...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("import: %v: %s", err, out)
	}
	d.cmd = exec.Command(bin, append(append([]string{"run", "-v", "--config", cfg, "--hostname-override", "bench"}, common...), args...)...)
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	d.cmd.Env = os.Environ()
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	d.pd = &probeDaemon{&benchDaemon{podsURL: fmt.Sprintf("http://127.0.0.1:%d/pods", port)}}
	if err := poll(20*time.Second, func() bool { p, err := d.pd.pods(); return err == nil && len(p) == 0 }); err != nil {
		d.stop()
		return nil, fmt.Errorf("daemon did not come up: %v\n%s", err, d.logs.String())
	}
	return d, nil
}

// stop removes every pod, stops the daemon and removes its dirs.
func (d *evictDaemon) stop() {
	entries, _ := os.ReadDir(d.manifests)
	for _, e := range entries {
		os.Remove(filepath.Join(d.manifests, e.Name()))
	}
	poll(60*time.Second, func() bool { p, err := d.pd.pods(); return err == nil && len(p) == 0 })
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	os.RemoveAll(d.runDir)
	os.RemoveAll(d.dir)
}

// memoryDir is the node cgroup's memory directory (v1 or v2).
func memoryDir(node string) (dir string, v2 bool) {
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		return filepath.Join("/sys/fs/cgroup", node), true
	}
	return filepath.Join("/sys/fs/cgroup/memory", node), false
}

// workingSet is the cgroup's usage − inactive_file, as cadvisor has it.
func workingSet(dir string, v2 bool) int64 {
	usageFile, inactiveKey := "memory.usage_in_bytes", "total_inactive_file"
	if v2 {
		usageFile, inactiveKey = "memory.current", "inactive_file"
	}
	b, err := os.ReadFile(filepath.Join(dir, usageFile))
	if err != nil {
		return 0
	}
	usage, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	f, err := os.Open(filepath.Join(dir, "memory.stat"))
	if err != nil {
		return usage
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), " "); ok && k == inactiveKey {
			n, _ := strconv.ParseInt(v, 10, 64)
			return usage - n
		}
	}
	return usage
}

// evictionLogTime is when the daemon logged that it evicts pod name.
func evictionLogTime(logs, name string) (time.Time, bool) {
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `msg="eviction manager: evicting pod"`) || !strings.Contains(line, "pod=default/"+name+" ") {
			continue
		}
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "time=") {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, strings.TrimPrefix(f[0], "time="))
		return t, err == nil
	}
	return time.Time{}, false
}

// detectionLatency runs the hog runs times and returns, for each, the time
// from the node's working set crossing the threshold (seen by polling the
// cgroup every 2 ms) to the daemon's log of the eviction.
func detectionLatency(bin, image string, runs int, notifier bool) ([]time.Duration, error) {
	dir, v2 := memoryDir(evictionNode)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	defer removeTree(evictionNode)
	limitFile := "memory.limit_in_bytes"
	if v2 {
		limitFile = "memory.max"
	}
	if err := os.WriteFile(filepath.Join(dir, limitFile), []byte(strconv.Itoa(evictionNodeBytes)), 0o644); err != nil {
		return nil, err
	}
	var args []string
	if !notifier {
		args = append(args, "--test-no-memory-notifier")
	}
	d, err := startEvictDaemon(bin, image, evictionNode, `evictionHard:
  memory.available: 200Mi
evictionPressureTransitionPeriod: 1s
`, args...)
	if err != nil {
		return nil, err
	}
	defer d.stop()
	var out []time.Duration
	for i := range runs {
		name := fmt.Sprintf("hog-%d-bench", i)
		if err := os.WriteFile(filepath.Join(d.manifests, "hog.yaml"), []byte(hogPod(i)), 0o644); err != nil {
			return nil, err
		}
		var crossed time.Time
		err := pollEvery(2*time.Millisecond, 60*time.Second, func() bool {
			if crossed.IsZero() && workingSet(dir, v2) > evictionNodeBytes-evictionThreshold {
				crossed = time.Now()
			}
			_, ok := evictionLogTime(d.logs.String(), name)
			return !crossed.IsZero() && ok
		})
		if err != nil {
			return nil, fmt.Errorf("run %d: no eviction: %v\n%s", i, err, d.logs.String())
		}
		at, _ := evictionLogTime(d.logs.String(), name)
		out = append(out, at.Sub(crossed))
		os.Remove(filepath.Join(d.manifests, "hog.yaml"))
		if err := poll(60*time.Second, func() bool { p, err := d.pd.pods(); return err == nil && len(p) == 0 }); err != nil {
			return nil, fmt.Errorf("run %d: pod not removed: %v", i, err)
		}
		// The next run starts from a calm node.
		if err := poll(30*time.Second, func() bool { return workingSet(dir, v2) < evictionNodeBytes/4 }); err != nil {
			return nil, fmt.Errorf("run %d: memory not released: %v", i, err)
		}
	}
	return out, nil
}

// removeTree removes cgroup p in every hierarchy, children first.
func removeTree(p string) {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*")
	roots = append(roots, "/sys/fs/cgroup")
	for _, root := range roots {
		var dirs []string
		filepath.Walk(filepath.Join(root, p), func(path string, info os.FileInfo, err error) error {
			if err == nil && info.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
		for i := len(dirs) - 1; i >= 0; i-- {
			os.Remove(dirs[i])
		}
	}
}

// evictionIdleCPU is the daemon's CPU over window with n running pods, its
// eviction manager on (the kubelet's default thresholds) or off
// (evictionHard: {}).
func evictionIdleCPU(bin, image string, n int, on bool, window time.Duration) (time.Duration, error) {
	cfg := "evictionHard: {}\n"
	if on {
		cfg = "" // the kubelet's defaults
	}
	d, err := startEvictDaemon(bin, image, "", cfg)
	if err != nil {
		return 0, err
	}
	defer func() {
		d.stop()
		removeTree("/staticpodd-bench-evict")
	}()
	for i := range n {
		m := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: idle-%d}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1000 & wait $!; done"]
`, i)
		if err := os.WriteFile(filepath.Join(d.manifests, fmt.Sprintf("idle-%d.yaml", i)), []byte(m), 0o644); err != nil {
			return 0, err
		}
	}
	if err := poll(60*time.Second, func() bool { return d.pd.countReady() == n }); err != nil {
		return 0, fmt.Errorf("%d pods not ready: %v", n, err)
	}
	time.Sleep(5 * time.Second) // the start-up's work done
	before := threadsCPU(d.cmd.Process.Pid)
	time.Sleep(window)
	return threadsCPU(d.cmd.Process.Pid) - before, nil
}

// benchEviction measures and prints both.
func benchEviction(bin, image string, runs int, window time.Duration) error {
	if bin == "" || image == "" {
		return fmt.Errorf("need -staticpodd and -image (make bench sets both)")
	}
	fmt.Printf("\neviction: memory.available crossing evictionHard 200Mi on a 512 MiB node cgroup, a leak of ~100 MB/s, %d runs each\n\n", runs)
	fmt.Printf("| detection | p50 | max |\n|---|---|---|\n")
	for _, notifier := range []bool{true, false} {
		ds, err := detectionLatency(bin, image, runs, notifier)
		if err != nil {
			return fmt.Errorf("eviction latency (notifier %v): %w", notifier, err)
		}
		name := "memory threshold notifier + 10 s housekeeping"
		if !notifier {
			name = "10 s housekeeping alone"
		}
		fmt.Printf("| staticpodd, %s | %s | %s |\n", name, ms(pct(ds, 50)), ms(pct(ds, 100)))
	}
	fmt.Printf("| kubelet (housekeeping 10 s, kernelMemcgNotification off by default) | ≈5 s expected | 10 s + stats age |\n")

	fmt.Printf("\neviction manager's CPU, idle daemon with 10 running pods, over %s\n\n", window)
	fmt.Printf("| daemon | CPU | per minute |\n|---|---|---|\n")
	var cpu [2]time.Duration
	for i, on := range []bool{false, true} {
		c, err := evictionIdleCPU(bin, image, 10, on, window)
		if err != nil {
			return fmt.Errorf("idle CPU (eviction %v): %w", on, err)
		}
		cpu[i] = c
		name := "evictionHard: {} (no eviction manager)"
		if on {
			name = "the kubelet's default thresholds"
		}
		fmt.Printf("| %s | %s | %s |\n", name, ms(c), ms(c*time.Minute/window))
	}
	fmt.Printf("| difference: the checks | %s | %s |\n", ms(cpu[1]-cpu[0]), ms((cpu[1]-cpu[0])*time.Minute/window))
	return nil
}
