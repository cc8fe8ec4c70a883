package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
)

// probeDaemon is the benchmark's daemon, with what the probe benchmarks
// ask of its pods.
type probeDaemon struct{ *benchDaemon }

func startProbeDaemon(bin, image, dir string) (*probeDaemon, error) {
	d, err := startDaemon(bin, image, dir)
	if err != nil {
		return nil, err
	}
	return &probeDaemon{d}, nil
}

func (d *probeDaemon) pods() ([]v1.Pod, error) {
	resp, err := http.Get(d.podsURL)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list v1.PodList
	err = json.NewDecoder(resp.Body).Decode(&list)
	return list.Items, err
}

// countReady counts the pods whose Ready condition is True.
func (d *probeDaemon) countReady() int {
	pods, _ := d.pods()
	n := 0
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// stop removes every manifest, waits for the pods to go (100 of them take
// a while), and stops the daemon.
func (d *probeDaemon) stop() {
	files, _ := filepath.Glob(filepath.Join(d.manifests, "*.yaml"))
	for _, f := range files {
		os.Remove(f)
	}
	poll(5*time.Minute, func() bool { p, err := d.pods(); return err == nil && len(p) == 0 })
	d.benchDaemon.stop()
}

// cpuTime is the user and system time pid has used.
func cpuTime(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command, which is in parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

func webPod(name string, probe bool) string {
	m := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: web
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", "mkdir -p /www && echo ok > /www/index.html && exec httpd -f -p 127.0.0.1:8080 -h /www"]
`, name)
	if probe {
		m += `    readinessProbe:
      httpGet: {path: /, port: 8080}
      periodSeconds: 1
`
	}
	return m
}

// benchProbes measures what the probes of n containers at a 1 s period cost
// the daemon: its CPU over window with n pods without probes, then with the
// same pods probed (httpGet into each pod's own network namespace).
func benchProbes(bin, image string, n int, window time.Duration) error {
	dir, err := os.MkdirTemp("", "staticpodd-bench-probes-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	d, err := startProbeDaemon(bin, image, dir)
	if err != nil {
		return err
	}
	defer d.stop()
	measure := func(probe bool) (float64, error) {
		for i := range n {
			tmp := filepath.Join(dir, "tmp.yaml")
			os.WriteFile(tmp, []byte(webPod(fmt.Sprintf("web%d", i), probe)), 0o644)
			os.Rename(tmp, filepath.Join(d.manifests, fmt.Sprintf("web%d.yaml", i)))
		}
		err := poll(5*time.Minute, func() bool {
			pods, _ := d.pods()
			if len(pods) != n || d.countReady() != n {
				return false
			}
			for _, p := range pods {
				if (p.Spec.Containers[0].ReadinessProbe != nil) != probe {
					return false
				}
			}
			return true
		})
		if err != nil {
			return 0, fmt.Errorf("%d pods ready (probes %v): %v\n%s", d.countReady(), probe, err, d.logs.String())
		}
		time.Sleep(5 * time.Second) // let the starts settle
		c0, t0 := cpuTime(d.cmd.Process.Pid), time.Now()
		time.Sleep(window)
		c1, t1 := cpuTime(d.cmd.Process.Pid), time.Now()
		return float64(c1-c0) / float64(t1.Sub(t0)) * 100, nil
	}
	idle, err := measure(false)
	if err != nil {
		return err
	}
	probed, err := measure(true)
	if err != nil {
		return err
	}
	floor, err := probeFloor(n, window)
	if err != nil {
		return err
	}
	fmt.Printf("\ndaemon CPU with %d running pods, over %s (%% of one core):\n\n", n, window)
	fmt.Printf("| pods | daemon CPU |\n|---|---|\n")
	fmt.Printf("| %d, no probes | %.2f%% |\n", n, idle)
	fmt.Printf("| %d, httpGet readiness probe every 1 s, each in its pod's network namespace | %.2f%% |\n", n, probed)
	fmt.Printf("| cost of %d probes/s | %.2f%% |\n", n, probed-idle)
	fmt.Printf("| floor: a bare Go loop making the same %d GETs/s, a fresh connection each (as the kubelet's probes), to busybox httpd on the host | %.2f%% |\n", n, floor)
	fmt.Printf("| ratio probes / floor | %.2f |\n", (probed-idle)/floor)
	return nil
}

// probeFloor is the CPU, in %% of one core, that n HTTP GETs a second cost a
// process that does nothing else: a wake-up of its ticker, then connect,
// request, read the answer, close, as an httpGet probe does (no keep-alive,
// as the kubelet's). It is what the kernel's loopback TCP and the least HTTP
// cost on this machine: the floor under a prober that wakes for each probe
// and opens a fresh connection for it. A GET that fails is an error, not a
// cheaper probe.
func probeFloor(n int, window time.Duration) (float64, error) {
	addr, stop, err := startFloorHTTPD()
	if err != nil {
		return 0, err
	}
	defer stop()
	tick := time.NewTicker(time.Second / time.Duration(n))
	defer tick.Stop()
	failed, ops := 0, 0
	var last error
	c0, t0 := selfCPU(), time.Now()
	for end := t0.Add(window); time.Now().Before(end); ops++ {
		<-tick.C
		if err := floorGET(addr); err != nil {
			failed, last = failed+1, err
		}
	}
	cpu := float64(selfCPU()-c0) / float64(time.Since(t0)) * 100
	if failed > 0 {
		return 0, fmt.Errorf("probe floor: %d of %d GETs failed, the last: %v", failed, ops, last)
	}
	return cpu, nil
}

// floorBody is what the floor's httpd serves, and every GET must read.
const floorBody = "staticpodd probe floor\n"

// startFloorHTTPD starts busybox httpd on a free port of the loopback,
// serving floorBody, and returns its address once a GET got floorBody from
// it: a port taken between its choice and httpd's bind is found so (httpd
// exits, or another server answers), and another port tried.
func startFloorHTTPD() (addr string, stop func(), err error) {
	dir, err := os.MkdirTemp("", "staticpodd-bench-floor-")
	if err != nil {
		return "", nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "index.html"), []byte(floorBody), 0o644); err != nil {
		os.RemoveAll(dir)
		return "", nil, err
	}
	for try := 1; ; try++ {
		l, err := net.Listen("tcp4", "127.0.0.1:0")
		if err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
		addr = l.Addr().String()
		l.Close()
		var stderr bytes.Buffer
		httpd := exec.Command("busybox", "httpd", "-f", "-p", addr, "-h", dir)
		httpd.Stderr = &stderr
		if err := httpd.Start(); err != nil {
			os.RemoveAll(dir)
			return "", nil, fmt.Errorf("busybox httpd: %w", err)
		}
		exited := make(chan struct{})
		go func() { httpd.Wait(); close(exited) }()
		kill := func() { httpd.Process.Kill(); <-exited }
		var got error
		err = poll(5*time.Second, func() bool {
			select {
			case <-exited:
				got = fmt.Errorf("busybox httpd exited: %s", bytes.TrimSpace(stderr.Bytes()))
				return true
			default:
			}
			got = floorGET(addr)
			return got == nil
		})
		if err == nil && got == nil {
			return addr, func() { kill(); os.RemoveAll(dir) }, nil
		}
		kill()
		if got == nil {
			got = err
		}
		if try == 5 {
			os.RemoveAll(dir)
			return "", nil, fmt.Errorf("busybox httpd on %s, try %d: no GET got its page: %v", addr, try, got)
		}
	}
}

// floorGET is one GET of the floor's page on a fresh connection.
func floorGET(addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	// A server that takes the connection and never answers fails the GET.
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", addr); err != nil {
		return err
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1024))
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK || string(b) != floorBody {
		return fmt.Errorf("GET %s: %s, %q", addr, res.Status, b)
	}
	return nil
}

// selfCPU is the user and system time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchReady measures the time from a container's exec to its pod's Ready,
// for a readiness probe that passes at once (initialDelaySeconds 0, the
// default period of 10 s): /pods is polled every 2 ms.
func benchReady(bin, image string, runs int) error {
	dir, err := os.MkdirTemp("", "staticpodd-bench-ready-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fifo := filepath.Join(dir, "sig", "fifo")
	os.MkdirAll(filepath.Dir(fifo), 0o755)
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		return err
	}
	d, err := startProbeDaemon(bin, image, dir)
	if err != nil {
		return err
	}
	defer d.stop()
	var ds []time.Duration
	for i := 0; i < runs+1; i++ {
		m := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: ready%d}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  volumes: [{name: sig, hostPath: {path: %s}}]
  containers:
  - name: web
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", ": > /sig/fifo; mkdir -p /www; exec httpd -f -p 127.0.0.1:%d -h /www"]
    volumeMounts: [{name: sig, mountPath: /sig}]
    readinessProbe:
      tcpSocket: {port: %d}
`, i, filepath.Dir(fifo), 18080+i, 18080+i)
		tmp := filepath.Join(dir, "tmp.yaml")
		os.WriteFile(tmp, []byte(m), 0o644)
		os.Rename(tmp, filepath.Join(d.manifests, "ready.yaml"))
		t0, err := waitFIFO(fifo, 30*time.Second)
		if err != nil {
			return err
		}
		var t1 time.Time
		err = pollEvery(2*time.Millisecond, 30*time.Second, func() bool { t1 = time.Now(); return d.countReady() == 1 })
		if err != nil {
			return fmt.Errorf("run %d: %v\n%s", i, err, d.logs.String())
		}
		if i > 0 {
			ds = append(ds, t1.Sub(t0))
		}
		os.Remove(filepath.Join(d.manifests, "ready.yaml"))
		if err := poll(30*time.Second, func() bool { p, err := d.pods(); return err == nil && len(p) == 0 }); err != nil {
			return err
		}
	}
	fmt.Printf("\ncontainer exec → pod Ready, readiness probe passing at once (tcpSocket, period 10 s), %d runs:\n\n", runs)
	fmt.Printf("| p50 | p90 |\n|---|---|\n| %s | %s |\n", ms(pct(ds, 50)), ms(pct(ds, 90)))
	return nil
}

// probePod is a hostNetwork pod of busybox with a readiness probe every
// second: exec runs `true` in the container; http GETs / of the httpd the
// container runs on 127.0.0.1:port, a fresh connection each.
func probePod(kind, name string, port int) string {
	m := fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  hostNetwork: true
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
`, name)
	if kind == "exec" {
		return m + `    command: ["sleep", "1000000"]
    readinessProbe:
      exec: {command: ["true"]}
      periodSeconds: 1
`
	}
	return m + fmt.Sprintf(`    command: ["sh", "-c", "mkdir -p /tmp/www && echo ok > /tmp/www/index.html && exec httpd -f -p 127.0.0.1:%d -h /tmp/www"]
    readinessProbe:
      httpGet: {host: 127.0.0.1, path: /, port: %d}
      periodSeconds: 1
`, port, port)
}

// treeCPU is the CPU, in clock ticks, that each of pids has used with its
// reaped children's (utime, stime, cutime, cstime): an exec probe's
// short-lived processes count once their parent reaped them.
func treeCPU(pids []int) map[int]int64 {
	ticks := map[int]int64{}
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
		for _, i := range []int{11, 12, 13, 14} {
			v, _ := strconv.ParseInt(f[i], 10, 64)
			ticks[pid] += v
		}
	}
	return ticks
}

// cpuBetween is the CPU the processes there at both ends used between them.
func cpuBetween(t0, t1 map[int]int64) time.Duration {
	var total int64
	for pid, c1 := range t1 {
		if c0, ok := t0[pid]; ok {
			total += c1 - c0
		}
	}
	return time.Duration(total) * time.Second / 100 // USER_HZ
}

// probeSide is one node agent under the probe benchmark: how to give it
// manifests, count its ready pods, list the processes whose CPU is its,
// and stop it.
type probeSide struct {
	name      string
	manifests string
	running   func() (n int, err error)
	ready     func() (n int, err error)
	pids      func() []int
	stop      func()
}

func runningOf(pods []v1.Pod) int {
	n := 0
	for _, p := range pods {
		if len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
			n++
		}
	}
	return n
}

func readyOf(pods []v1.Pod) int {
	n := 0
	for _, p := range pods {
		for _, c := range p.Status.Conditions {
			if c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
				n++
			}
		}
	}
	return n
}

// measureProbes drops n pods of kind on side, waits until all run, and
// returns the CPU, in % of one core, of the side's processes over window,
// and how many pods were Ready at its end.
func measureProbes(side *probeSide, kind string, n int, window time.Duration) (float64, int, error) {
	for i := range n {
		tmp := filepath.Join(filepath.Dir(side.manifests), "tmp.yaml")
		os.WriteFile(tmp, []byte(probePod(kind, fmt.Sprintf("p%d", i), 20000+i)), 0o644)
		if err := os.Rename(tmp, filepath.Join(side.manifests, fmt.Sprintf("p%d.yaml", i))); err != nil {
			return 0, 0, err
		}
	}
	// Running, not Ready: on a loaded machine probes time out (after
	// their 1 s), and cost as much as those that pass.
	if err := pollEvery(time.Second, 10*time.Minute, func() bool { r, _ := side.running(); return r == n }); err != nil {
		r, _ := side.running()
		return 0, 0, fmt.Errorf("%s: %d of %d pods running: %v", side.name, r, n, err)
	}
	time.Sleep(10 * time.Second) // let the starts settle
	pids := side.pids()
	c0, t0 := treeCPU(pids), time.Now()
	time.Sleep(window)
	c1, t1 := treeCPU(pids), time.Now()
	ready, _ := side.ready()
	return float64(cpuBetween(c0, c1)) / float64(t1.Sub(t0)) * 100, ready, nil
}

// benchProbesKubelet measures the node agent's CPU with n pods, each with
// one readiness probe every second, exec then httpGet: staticpodd (daemon,
// monitors, the exec server and what they reap) against the kubelet v1.37.2
// on Debian's containerd (kubelet, containerd, shims and what they reap),
// one side at a time, the sides alternating over rounds; with old, an older
// staticpodd as a third side.
func benchProbesKubelet(bin, old, image, kubeletBin string, n, rounds int, window time.Duration) error {
	if rounds < 1 {
		return fmt.Errorf("probes-kubelet: -probe-rounds %d: want 1 or more", rounds)
	}
	if kubeletBin == "" {
		return fmt.Errorf("probes-kubelet: need -kubelet (bash tests/controlplane/build.sh kubelet prints its directory)")
	}
	ours := func(name, bin string) func() (*probeSide, error) {
		return func() (*probeSide, error) {
			dir, err := os.MkdirTemp("", "staticpodd-bench-probes-")
			if err != nil {
				return nil, err
			}
			d, err := startProbeDaemon(bin, image, dir)
			if err != nil {
				os.RemoveAll(dir)
				return nil, err
			}
			return &probeSide{
				name: name, manifests: d.manifests,
				running: func() (int, error) { p, err := d.pods(); return runningOf(p), err },
				ready:   func() (int, error) { p, err := d.pods(); return readyOf(p), err },
				// One-shot exec helpers (older builds) come and go: the
				// daemon reaps them, so their CPU is its cutime. An exec
				// server lives through the window, and its inits' CPU is
				// its cutime.
				pids: func() []int {
					return append([]int{d.cmd.Process.Pid}, slices.DeleteFunc(monitorPids(d.runDir), isOneShotExecHelper)...)
				},
				stop: func() { d.stop(); os.RemoveAll(dir) },
			}, nil
		}
	}
	theirs := func() (*probeSide, error) {
		k, err := startBenchKubelet(kubeletBin, image)
		if err != nil {
			return nil, err
		}
		return &probeSide{
			name: "kubelet", manifests: k.manifests,
			running: func() (int, error) { p, err := k.pods(); return runningOf(p), err },
			ready:   func() (int, error) { p, err := k.pods(); return readyOf(p), err },
			pids: func() []int {
				return append([]int{k.kubelet.Process.Pid, k.containerd.Process.Pid}, k.shims()...)
			},
			stop: k.stop,
		}, nil
	}
	starts := []func() (*probeSide, error){ours("staticpodd", bin), theirs}
	if old != "" {
		starts = append(starts, ours("staticpodd-old", old))
	}
	// cpu[kind][side] are the rounds' figures.
	cpu := map[string]map[string][]float64{"exec": {}, "http": {}}
	for r := range rounds {
		for _, kind := range []string{"exec", "http"} {
			for i := range starts {
				// Each round starts with the next side.
				side, err := starts[(i+r)%len(starts)]()
				if err != nil {
					return err
				}
				load, _ := os.ReadFile("/proc/loadavg")
				c, ready, err := measureProbes(side, kind, n, window)
				side.stop()
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "probes-kubelet: round %d, %s probes, %s: %.2f%% of a core, %d of %d pods Ready at the end (loadavg before %s)\n",
					r+1, kind, side.name, c, ready, n, strings.TrimSpace(string(load)))
				cpu[kind][side.name] = append(cpu[kind][side.name], c)
			}
			if kind == "http" {
				// The floor of a prober that, as the kubelet's and ours,
				// wakes for each probe and opens a fresh connection for
				// it: a bare loop making the same GETs, in the same round.
				f, err := probeFloor(n, window)
				if err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "probes-kubelet: round %d, http floor (a bare Go loop, %d GETs/s): %.2f%% of a core\n", r+1, n, f)
				cpu[kind]["floor"] = append(cpu[kind]["floor"], f)
			}
		}
	}
	fmt.Printf("\nnode agent CPU with %d hostNetwork busybox pods, one readiness probe each every 1 s, over %s, %d rounds, the sides alternating (%% of one core; median, min–max):\n\n", n, window, rounds)
	head := "| probes | staticpodd (daemon, monitors, exec server) | kubelet v1.37.2 + containerd (kubelet, containerd, shims) | ratio |"
	sep := "|---|---|---|---|"
	if old != "" {
		head += " staticpodd-old | ratio new / old |"
		sep += "---|---|"
	}
	fmt.Printf("%s\n%s\n", head, sep)
	for _, kind := range []string{"exec", "http"} {
		o, t := cpu[kind]["staticpodd"], cpu[kind]["kubelet"]
		fmt.Printf("| %s | %s | %s | %.2f |", kind, spreadPct(o), spreadPct(t), medianPct(o)/medianPct(t))
		if old != "" {
			b := cpu[kind]["staticpodd-old"]
			fmt.Printf(" %s | %.2f |", spreadPct(b), medianPct(o)/medianPct(b))
		}
		fmt.Println()
	}
	f, t := cpu["http"]["floor"], cpu["http"]["kubelet"]
	fmt.Printf("\nthe floor of an httpGet probe that wakes for each probe and opens a fresh connection (a bare Go loop making %d GETs a second to busybox httpd on the loopback, nothing else, in the same rounds): %s of a core; staticpodd's http %.2f of it, the kubelet's %.2f; a fifth of the kubelet's is %.2f of the floor\n",
		n, spreadPct(f), medianPct(cpu["http"]["staticpodd"])/medianPct(f), medianPct(t)/medianPct(f), medianPct(t)/5/medianPct(f))
	return nil
}

func medianPct(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	switch {
	case len(s) == 0:
		return 0
	case len(s)%2 == 0:
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

// spreadPct is "median (min–max)" of v, in %.
func spreadPct(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f%% (%.2f–%.2f)", medianPct(v), slices.Min(v), slices.Max(v))
}

// isOneShotExecHelper tells whether pid is an older build's exec helper,
// which ran one exec (`__staticpodd_exec <root> <id>`), not an exec server
// (`__staticpodd_exec <root>`).
func isOneShotExecHelper(pid int) bool {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return bytes.HasPrefix(b, []byte("staticpodd-monitor\x00__staticpodd_exec\x00")) && bytes.Count(b, []byte{0}) == 4
}
