package main

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// relistPod is a manifest whose pod waits for an image that is never there
// (imagePullPolicy Never): the daemon knows it, and no container runs to
// blur the daemon's own cost.
func relistPod(i int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: relist-%03d
  labels: {app: relist, index: "%d"}
spec:
  terminationGracePeriodSeconds: 5
  containers:
  - name: main
    image: registry.invalid/absent:%d
    imagePullPolicy: Never
    command: ["sh", "-c", "sleep 3600"]
    env: [{name: INDEX, value: "%d"}]
    resources: {limits: {memory: 64Mi, cpu: 100m}}
    livenessProbe: {exec: {command: ["true"]}, periodSeconds: 10}
`, i, i, i, i)
}

// benchRelist measures the CPU staticpodd uses over window while idle with n
// manifests in its directory: relisting every 20s (fileCheckFrequency, the
// kubelet's default), and never within the window (1h), the difference being
// what the relists cost. syncFrequency is an hour in both, so the pod
// workers' periodic syncs do not blur the difference. It also times parsing every manifest once, which is
// what the kubelet does at each relist (staticpodd reads and hashes each file
// and parses only those whose content changed).
func benchRelist(bin string, n int, window time.Duration) error {
	results := map[time.Duration]time.Duration{}
	for _, period := range []time.Duration{20 * time.Second, time.Hour} {
		cpu, err := idleCPU(bin, n, period, window)
		if err != nil {
			return fmt.Errorf("fileCheckFrequency %s: %w", period, err)
		}
		results[period] = cpu
	}
	parse, err := parseAll(n)
	if err != nil {
		return err
	}
	relists := float64(window / (20 * time.Second))
	fmt.Printf("\nidle CPU of the daemon over %s with %d manifests (pods waiting for an absent image)\n\n", window, n)
	fmt.Printf("| fileCheckFrequency | daemon CPU | per minute |\n|---|---|---|\n")
	for _, period := range []time.Duration{20 * time.Second, time.Hour} {
		cpu := results[period]
		fmt.Printf("| %s | %s | %s |\n", period, ms(cpu), ms(time.Duration(float64(cpu)*float64(time.Minute)/float64(window))))
	}
	diff := results[20*time.Second] - results[time.Hour]
	fmt.Printf("\nrelists in the window: %.0f; their cost (difference): %s, %s per relist\n", relists, ms(diff), ms(time.Duration(float64(diff)/relists)))
	fmt.Printf("parsing all %d manifests once (what the kubelet does at every relist): %s\n", n, ms(parse))
	return nil
}

// idleCPU runs a daemon on n manifests relisting every period and returns
// the CPU time it used over window once every pod is known.
func idleCPU(bin string, n int, period, window time.Duration) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "staticpodd-bench-relist-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	manifests := filepath.Join(dir, "manifests")
	os.MkdirAll(manifests, 0o755)
	for i := range n {
		if err := os.WriteFile(filepath.Join(manifests, fmt.Sprintf("pod-%03d.yaml", i)), []byte(relistPod(i)), 0o644); err != nil {
			return 0, err
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
fileCheckFrequency: %s
syncFrequency: 1h
address: 127.0.0.1
readOnlyPort: %d
podLogsDir: %s
cgroupRoot: /staticpodd-bench-relist
`, manifests, period, port, filepath.Join(dir, "logs"))), 0o644)
	runDir := filepath.Join("/run", filepath.Base(dir))
	defer os.RemoveAll(runDir)
	var logs bytes.Buffer
	cmd := exec.Command(bin, "run", "--config", cfg, "--hostname-override", "bench", "--root-dir", filepath.Join(dir, "root"), "--run-dir", runDir)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
		dirs, _ := filepath.Glob("/sys/fs/cgroup/*/staticpodd-bench-relist")
		for _, dir := range dirs {
			os.Remove(dir)
		}
	}()
	pd := &probeDaemon{&benchDaemon{podsURL: fmt.Sprintf("http://127.0.0.1:%d/pods", port)}}
	if err := poll(60*time.Second, func() bool { p, err := pd.pods(); return err == nil && len(p) == n }); err != nil {
		return 0, fmt.Errorf("%d pods not listed: %v\n%s", n, err, logs.String())
	}
	time.Sleep(5 * time.Second) // the start-up's work done
	before := threadsCPU(cmd.Process.Pid)
	time.Sleep(window)
	cpu := threadsCPU(cmd.Process.Pid) - before
	for _, f := range must(filepath.Glob(filepath.Join(manifests, "*.yaml"))) {
		os.Remove(f)
	}
	poll(60*time.Second, func() bool { p, err := pd.pods(); return err == nil && len(p) == 0 })
	return cpu, nil
}

// threadsCPU is the CPU time pid's threads have run, in nanoseconds from
// each thread's schedstat: /proc/<pid>/stat counts in 10 ms ticks, too coarse
// for an idle daemon. A thread that exits takes its time with it; the Go
// runtime keeps its threads.
func threadsCPU(pid int) time.Duration {
	var total time.Duration
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		if f := strings.Fields(string(b)); len(f) > 0 {
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			total += time.Duration(ns)
		}
	}
	return total
}

// parseAll is the time to parse n manifests once, the best of 20 rounds.
func parseAll(n int) (time.Duration, error) {
	var data [][]byte
	for i := range n {
		data = append(data, []byte(relistPod(i)))
	}
	best := time.Duration(1<<63 - 1)
	for range 20 {
		start := time.Now()
		for i, d := range data {
			p := manifest.Check(d, manifest.SourceFile, fmt.Sprintf("/etc/kubernetes/manifests/pod-%03d.yaml", i), "bench")
			if len(p.Errors) > 0 {
				return 0, p.Err()
			}
		}
		best = min(best, time.Since(start))
	}
	return best, nil
}

func must[T any](v T, _ error) T { return v }
