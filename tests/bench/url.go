package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
)

// manifestServer serves one body at /pods and records when the daemon first
// fetched the body set last.
type manifestServer struct {
	mu      sync.Mutex
	body    []byte
	answer  http.HandlerFunc // answers instead of body when set
	setAt   time.Time
	fetched time.Time // first request served the current body; zero until then
	hits    int
}

func (s *manifestServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	body, answer := s.body, s.answer
	s.hits++
	if s.fetched.IsZero() {
		s.fetched = time.Now()
	}
	s.mu.Unlock()
	if answer != nil {
		answer(w, r)
		return
	}
	w.Write(body)
}

// set serves body from now on and returns when it was set.
func (s *manifestServer) set(body string) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body, s.answer, s.setAt, s.fetched = []byte(body), nil, time.Now(), time.Time{}
	return s.setAt
}

func (s *manifestServer) firstFetch() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fetched
}

func (s *manifestServer) requests() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits
}

// urlDaemon is a staticpodd whose only source is a URL served by the bench.
type urlDaemon struct {
	cmd     *exec.Cmd
	logs    bytes.Buffer
	srv     *manifestServer
	http    *http.Server
	podsURL string
	runDir  string
	cgroup  string
}

func startURLDaemon(bin, image, dir, period, syncFrequency, body string) (*urlDaemon, error) {
	d := &urlDaemon{srv: &manifestServer{body: []byte(body)}, runDir: filepath.Join("/run", filepath.Base(dir)),
		cgroup: "/" + filepath.Base(dir)}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	d.http = &http.Server{Handler: d.srv}
	go d.http.Serve(l)
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := pl.Addr().(*net.TCPAddr).Port
	pl.Close()
	d.podsURL = fmt.Sprintf("http://127.0.0.1:%d/pods", port)
	empty := filepath.Join(dir, "empty")
	os.MkdirAll(empty, 0o755)
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
staticPodURL: http://%s/pods
httpCheckFrequency: %s
syncFrequency: %s
address: 127.0.0.1
readOnlyPort: %d
podLogsDir: %s
cgroupRoot: %s
`, empty, l.Addr(), period, syncFrequency, port, filepath.Join(dir, "logs"), d.cgroup)), 0o644)
	common := []string{"--root-dir", filepath.Join(dir, "root"), "--run-dir", d.runDir}
	if out, err := exec.Command(bin, append([]string{"images", "import", image}, common...)...).CombinedOutput(); err != nil {
		d.http.Close()
		return nil, fmt.Errorf("import: %v: %s", err, out)
	}
	d.cmd = exec.Command(bin, append([]string{"run", "--config", cfg, "--hostname-override", "bench"}, common...)...)
	d.cmd.Stdout, d.cmd.Stderr = &d.logs, &d.logs
	if err := d.cmd.Start(); err != nil {
		d.http.Close()
		return nil, err
	}
	if err := poll(10*time.Second, func() bool { _, err := d.countPods(); return err == nil }); err != nil {
		d.stop()
		return nil, fmt.Errorf("daemon did not come up: %v\n%s", err, d.logs.String())
	}
	return d, nil
}

func (d *urlDaemon) countPods() (int, error) {
	resp, err := http.Get(d.podsURL)
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	var list struct{ Items []struct{} }
	err = json.NewDecoder(resp.Body).Decode(&list)
	return len(list.Items), err
}

// countWaiting counts the pods whose container waits with reason.
func (d *urlDaemon) countWaiting(reason string) int {
	resp, err := http.Get(d.podsURL)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	var list v1.PodList
	if json.NewDecoder(resp.Body).Decode(&list) != nil {
		return -1
	}
	n := 0
	for _, p := range list.Items {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Waiting != nil && cs.State.Waiting.Reason == reason {
				n++
			}
		}
	}
	return n
}

// stop serves an empty list, waits for the pods to go, stops the daemon and
// the server.
func (d *urlDaemon) stop() {
	d.srv.set(`{"apiVersion":"v1","kind":"PodList","items":[]}`)
	poll(2*time.Minute, func() bool { n, err := d.countPods(); return err == nil && n == 0 })
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	d.http.Close()
	os.RemoveAll(d.runDir)
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*" + d.cgroup)
	for _, dir := range dirs {
		os.Remove(dir)
	}
}

// benchURL measures the time from the URL's content changing to the new
// container's exec at httpCheckFrequency 1s, and which part of it is the
// wait for the next poll (content set → the daemon's request that got it).
func benchURL(bin, image string, runs int) error {
	dir, err := os.MkdirTemp("", "staticpodd-bench-url-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fifo := filepath.Join(dir, "sig", "fifo")
	os.MkdirAll(filepath.Dir(fifo), 0o755)
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		return err
	}
	empty := `{"apiVersion":"v1","kind":"PodList","items":[]}`
	d, err := startURLDaemon(bin, image, dir, "1s", "1m", empty)
	if err != nil {
		return err
	}
	defer d.stop()
	var total, wait, after []time.Duration
	for i := 0; i < runs+1; i++ { // the first run warms caches and is not counted
		body := fmt.Sprintf(`apiVersion: v1
kind: PodList
items:
- metadata: {name: url%d}
  spec:
    hostNetwork: true
    restartPolicy: Never
    terminationGracePeriodSeconds: 1
    volumes: [{name: sig, hostPath: {path: %s}}]
    containers:
    - name: main
      image: busybox
      imagePullPolicy: IfNotPresent
      command: ["sh", "-c", ": > /sig/fifo"]
      volumeMounts: [{name: sig, mountPath: /sig}]
`, i, filepath.Dir(fifo))
		// The change lands anywhere in the poll period, as an operator's does.
		time.Sleep(rand.N(time.Second))
		t0 := d.srv.set(body)
		t1, err := waitFIFO(fifo, 30*time.Second)
		if err != nil {
			return fmt.Errorf("run %d: %v\n%s", i, err, d.logs.String())
		}
		tf := d.srv.firstFetch()
		if i > 0 {
			total = append(total, t1.Sub(t0))
			wait = append(wait, tf.Sub(t0))
			after = append(after, t1.Sub(tf))
		}
		d.srv.set(empty)
		if err := poll(30*time.Second, func() bool { n, err := d.countPods(); return err == nil && n == 0 }); err != nil {
			return fmt.Errorf("run %d: pod not removed: %v", i, err)
		}
	}
	fmt.Printf("\nURL content changed → container exec, httpCheckFrequency 1s, %d runs:\n\n", runs)
	fmt.Printf("| | p50 | p90 |\n|---|---|---|\n")
	fmt.Printf("| content set → exec | %s | %s |\n", ms(pct(total, 50)), ms(pct(total, 90)))
	fmt.Printf("| of which: waiting for the next poll (set → the request that got it) | %s | %s |\n", ms(pct(wait, 50)), ms(pct(wait, 90)))
	fmt.Printf("| of which: that request → exec | %s | %s |\n", ms(pct(after, 50)), ms(pct(after, 90)))
	return nil
}

// benchURLIdle measures the daemon's CPU over window while a URL serves the
// same PodList of n pods, at httpCheckFrequency 1s and at the default 20s:
// the difference is the cost of the extra polls, each an identical body. The
// pods name an image the store does not have (imagePullPolicy Never), so they
// wait without running anything; syncFrequency 10m keeps the workers quiet.
func benchURLIdle(bin, image string, n int, window time.Duration) error {
	var items []string
	for i := range n {
		items = append(items, fmt.Sprintf(`{"metadata":{"name":"idle%d","labels":{"app":"bench","tier":"backend"}},`+
			`"spec":{"terminationGracePeriodSeconds":1,"containers":[{"name":"main","image":"absent:latest",`+
			`"imagePullPolicy":"Never","command":["sleep","3600"],"env":[{"name":"INDEX","value":"%d"}],`+
			`"resources":{"limits":{"cpu":"100m","memory":"64Mi"}}}]}}`, i, i))
	}
	body := `{"apiVersion":"v1","kind":"PodList","items":[` + strings.Join(items, ",") + `]}`
	type result struct {
		period   string
		cpu      time.Duration
		requests int
		took     time.Duration
	}
	var results []result
	for _, period := range []string{"1s", "20s"} {
		dir, err := os.MkdirTemp("", "staticpodd-bench-urlidle-")
		if err != nil {
			return err
		}
		d, err := startURLDaemon(bin, image, dir, period, "10m", body)
		if err != nil {
			os.RemoveAll(dir)
			return err
		}
		err = poll(5*time.Minute, func() bool { return d.countWaiting("ErrImageNeverPull") == n })
		if err != nil {
			d.stop()
			os.RemoveAll(dir)
			return fmt.Errorf("%d pods waiting for their image: %v\n%s", d.countWaiting("ErrImageNeverPull"), err, d.logs.String())
		}
		time.Sleep(5 * time.Second) // let the last of them settle
		r0, c0, t0 := d.srv.requests(), schedTime(d.cmd.Process.Pid), time.Now()
		time.Sleep(window)
		r1, c1, t1 := d.srv.requests(), schedTime(d.cmd.Process.Pid), time.Now()
		results = append(results, result{period, c1 - c0, r1 - r0, t1.Sub(t0)})
		d.stop()
		os.RemoveAll(dir)
	}
	fmt.Printf("\ndaemon CPU over %s, a URL serving the same %d-pod PodList (%d KiB; pods waiting for an absent image):\n\n", window, n, len(body)>>10)
	fmt.Printf("| httpCheckFrequency | polls | daemon CPU | %% of one core |\n|---|---|---|---|\n")
	for _, r := range results {
		fmt.Printf("| %s | %d | %.1f ms | %.3f%% |\n", r.period, r.requests, float64(r.cpu.Microseconds())/1000, float64(r.cpu)/float64(r.took)*100)
	}
	if dp := results[0].requests - results[1].requests; dp > 0 {
		per := (results[0].cpu - results[1].cpu) / time.Duration(dp)
		fmt.Printf("| difference per poll of identical bytes | | %.2f ms | |\n", float64(per.Microseconds())/1000)
	}
	return nil
}

// schedTime is the CPU time of every thread of pid, in nanoseconds
// (/proc/<pid>/task/*/schedstat), finer than the clock ticks of /proc/<pid>/stat.
func schedTime(pid int) time.Duration {
	var total time.Duration
	stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil {
			continue // the thread ended
		}
		var ns int64
		fmt.Sscan(string(b), &ns)
		total += time.Duration(ns)
	}
	return total
}
