// Command bench measures how long staticpodd takes from a manifest's rename(2)
// into the watched directory until the container's process has exec'd its
// command, side by side with `runc run -d` of an equivalent bundle; and how
// long `staticpodd exec` of `true` takes, side by side with `runc exec`.
//
// Both containers run the same command, `sh -c ': > /sig/fifo'`: opening the FIFO
// for writing is the first thing the exec'd process does, and it unblocks the
// benchmark's open for reading, which is the end of the measurement.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	bbtree "github.com/staticpodd/staticpodd/rootfs/busybox"
	"golang.org/x/sys/unix"
)

func main() {
	runs := flag.Int("runs", 30, "runs per side")
	bin := flag.String("staticpodd", os.Getenv("STATICPODD_BIN"), "staticpodd binary")
	image := flag.String("image", os.Getenv("STATICPODD_IMAGE"), "busybox image tarball")
	runc := flag.String("runc", "runc", "runc binary")
	busybox := flag.String("busybox", "/bin/busybox", "busybox-static binary for the runc bundle")
	probePods := flag.Int("probe-pods", 100, "pods whose probes' CPU cost is measured; 0 skips it")
	probeWindow := flag.Duration("probe-window", 30*time.Second, "how long the probes' CPU is measured")
	kubelet := flag.String("kubelet", os.Getenv("STATICPODD_KUBELET"), "the kubelet v1.37.2 binary the probe benchmark compares with (probes-kubelet; STATICPODD_KUBELET)")
	probeRounds := flag.Int("probe-rounds", 2, "rounds of probes-kubelet, the sides alternating")
	probeOld := flag.String("probe-old", "", "another staticpodd binary (an older build) measured as a third side of probes-kubelet, in the same rounds")
	logMB := flag.Int("log-mb", 200, "MB of container output for the log copy measurement; 0 skips it")
	logsOnly := flag.Bool("logs-only", false, "measure only the log copy (= -only logs)")
	urlPods := flag.Int("url-pods", 100, "pods of the PodList whose polling's CPU cost is measured; 0 skips it")
	urlWindow := flag.Duration("url-window", 60*time.Second, "how long the URL polling's CPU is measured")
	relistManifests := flag.Int("relist-manifests", 100, "manifests whose relist's CPU cost is measured; 0 skips it")
	relistWindow := flag.Duration("relist-window", time.Minute, "how long the idle daemon's CPU is measured")
	relistOnly := flag.Bool("relist-only", false, "measure only the relist's CPU cost (= -only relist, make bench-relist)")
	evictRuns := flag.Int("eviction-runs", 5, "runs of the memory leak per detection mode; 0 skips the eviction benchmark")
	evictWindow := flag.Duration("eviction-window", time.Minute, "how long the eviction manager's idle CPU is measured")
	hostileRuns := flag.Int("hostile-runs", 3, "runs of each hostile manifest whose reading's memory is measured; 0 skips it")
	outageWindow := flag.Duration("outage-window", 10*time.Minute, "how long the mirror client faces a refusing API server")
	nodeAPIPods := flag.String("nodeapi-pods", "10,100", "pod counts at which the node API's endpoints are measured in a real daemon; empty skips it")
	scalePods := flag.String("pods", os.Getenv("BENCH_PODS"), "comma-separated pod counts of the scale benchmark (BENCH_PODS; default 10,100)")
	scaleRounds := flag.Int("scale-rounds", 2, "rounds of the scale benchmark per pod count, the sides alternating")
	scaleIdle := flag.Duration("scale-idle-window", 30*time.Second, "how long the idle CPU with the scale benchmark's pods is measured")
	imageRuns := flag.Int("image-runs", 5, "runs of the image export + import round trip; 0 skips it")
	imagePadMB := flag.Int("image-pad-mb", 100, "MB of random bytes in the round trip's image")
	flag.BoolVar(&peer.systemd, "systemd-cgroup", false, "the systemd cgroup driver on every side: the daemon's cgroupDriver, runc --systemd-cgroup, the floor's scopes (where systemd is init: make bench-systemd)")
	flag.StringVar(&peer.floor, "floor", "", "a prebuilt floor program (tests/bench/floor); empty builds it with go")
	flag.BoolVar(&peer.runcLoop, "runc-loop", false, "the scale benchmark's runc runs its containers one after the other, as a shell loop, not all at once (make bench-systemd: 100 at once under --systemd-cgroup in the emulated guest overran libcontainer's 30 s wait for systemd's job)")
	flag.BoolVar(&peer.trace, "trace-starts", false, "print each start's two ends, and the scale benchmark's burst, adoption and removal, on CLOCK_MONOTONIC (the journal's -o short-monotonic clock, perf's -k CLOCK_MONOTONIC), to set beside systemd's unit events or a profile")
	flag.IntVar(&peer.timeoutScale, "timeout-scale", 1, "multiplies every wait's limit: a guest in software emulation is tens of times slower")
	memoryPods := flag.String("memory-pods", "10,100", "pod counts at which the daemon's peak and rest memory are measured; empty skips it")
	memoryPeer := flag.String("memory-peer", "", "another staticpodd binary (an older build) whose memory is measured in the same rounds, the two alternating")
	memoryRounds := flag.Int("memory-rounds", 2, "rounds of the memory benchmark per pod count")
	memorySettle := flag.Duration("memory-settle", 0, "how long after the daemon answers the memory benchmark's pods come (its trim after the start: 10 s after its first sync)")
	memoryBreakdown := flag.Bool("memory-breakdown", false, "print where the daemon's RSS at rest goes: the binary's pages by section, anonymous memory, and with a -tags benchprofile build the Go runtime's accounts and goroutines")
	memoryRest := flag.Duration("memory-rest", time.Minute, "how long after the last pod ran the daemon counts as at rest")
	idlePods := flag.Int("idle-pods", 100, "pods running while the idle daemon's wake-ups are counted; 0 skips it")
	idleWindow := flag.Duration("idle-window", time.Minute, "how long the idle daemon's wake-ups and CPU are counted")
	idleRounds := flag.Int("idle-rounds", 2, "rounds of the idle benchmark, the two binaries alternating")
	idleOld := flag.String("idle-old", "", "a binary to measure beside -staticpodd in the idle benchmark (one built from main)")
	idleTraced := flag.String("idle-traced", "", "label=binary,...: builds with the benchtrace tag whose idle wake-ups are named by source")
	only := flag.String("only", "", "comma-separated benchmarks to run: start (with exec), exec, scale, memory, network, ready, probes, probes-kubelet, probe-floor (the floor of an httpGet probe taken apart; by name only), url, logs, relist, hostile, eviction, nodeapi, images, idle, outage (default: all but outage)")
	flag.Parse()
	if peer.timeoutScale < 1 {
		fmt.Fprintln(os.Stderr, "bench: -timeout-scale: want 1 or more")
		os.Exit(2)
	}
	removeCopy := func() {}
	if *bin != "" {
		copied, remove, err := installedCopy(*bin)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		*bin, removeCopy = copied, remove
	}
	if *memoryPeer != "" {
		copied, remove, err := installedCopy(*memoryPeer)
		if err != nil {
			removeCopy()
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		removeBin := removeCopy
		*memoryPeer, removeCopy = copied, func() { removeBin(); remove() }
	}
	defer removeCopy()
	if *logsOnly {
		*only = "logs"
	}
	if *relistOnly {
		*only = "relist"
	}
	want := func(name string) bool {
		return *only == "" || slices.Contains(strings.Split(*only, ","), name)
	}
	var err error
	if want("start") {
		err = run(*runs, *bin, *image, *runc, *busybox)
	}
	// Also part of start: by name only.
	if err == nil && slices.Contains(strings.Split(*only, ","), "exec") {
		err = runExec(*runs, *bin, *image, *runc, *busybox)
	}
	// By name only: it is the probes' floor taken apart.
	if err == nil && slices.Contains(strings.Split(*only, ","), "probe-floor") {
		err = benchProbeFloor(max(*probePods, 1), 15*time.Second)
	}
	if err == nil && want("scale") {
		if *scalePods == "" {
			*scalePods = "10,100"
		}
		for _, f := range strings.Split(*scalePods, ",") {
			n, perr := strconv.Atoi(strings.TrimSpace(f))
			if perr != nil || n <= 0 {
				err = fmt.Errorf("-pods %q: want positive counts", *scalePods)
				break
			}
			if err = benchScale(*bin, *image, *runc, *busybox, n, *scaleRounds, *scaleIdle); err != nil {
				break
			}
		}
	}
	if err == nil && want("memory") && *memoryPods != "" {
		err = benchMemory(*bin, *memoryPeer, *image, *memoryPods, *memoryRounds, *memorySettle, *memoryRest, *memoryBreakdown)
	}
	if err == nil && want("network") {
		err = benchNetwork(*bin, *image, *runs)
	}
	if err == nil && want("ready") {
		err = benchReady(*bin, *image, 10)
	}
	if err == nil && want("probes") && *probePods > 0 {
		err = benchProbes(*bin, *image, *probePods, *probeWindow)
	}
	if err == nil && want("probes-kubelet") && *probePods > 0 && *kubelet != "" {
		err = benchProbesKubelet(*bin, *probeOld, *image, *kubelet, *probePods, *probeRounds, *probeWindow)
	}
	if err == nil && want("url") {
		err = benchURL(*bin, *image, *runs)
	}
	if err == nil && want("url") && *urlPods > 0 {
		err = benchURLIdle(*bin, *image, *urlPods, *urlWindow)
	}
	if err == nil && want("logs") && *logMB > 0 {
		err = runLogs(*bin, *image, *logMB)
	}
	if err == nil && want("relist") && *relistManifests > 0 {
		err = benchRelist(*bin, *relistManifests, *relistWindow)
	}
	if err == nil && want("hostile") && *hostileRuns > 0 {
		err = benchHostileMemory(*bin, *image, *hostileRuns)
	}
	if err == nil && want("nodeapi") && *nodeAPIPods != "" {
		err = benchNodeAPI(*bin, *image, *nodeAPIPods)
	}
	if err == nil && want("eviction") && *evictRuns > 0 {
		err = benchEviction(*bin, *image, *evictRuns, *evictWindow)
	}
	if err == nil && want("idle") && *idlePods > 0 {
		err = benchIdle(*bin, *idleOld, *image, *idlePods, *idleRounds, *idleWindow, *idleTraced)
	}
	if err == nil && want("images") && *imageRuns > 0 {
		err = benchImages(*bin, *imageRuns, *imagePadMB)
	}
	// Twenty minutes: only when asked for by name (make bench-outage).
	outage := slices.Contains(strings.Split(*only, ","), "outage")
	if err == nil && outage && *outageWindow > 0 {
		err = benchOutage(*outageWindow)
	}
	if err == nil && outage && *outageWindow > 0 && *bin != "" {
		err = benchOutageDaemon(*bin, *image, *outageWindow)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		removeCopy()
		os.Exit(1)
	}
}

// peer is how the sides run that are not staticpodd, and the cgroup driver
// all sides share.
var peer struct {
	systemd bool   // -systemd-cgroup
	floor   string // -floor
	// timeoutScale multiplies the limit of every wait (pollEvery, waitFIFO).
	timeoutScale int
	trace        bool // -trace-starts
	runcLoop     bool // -runc-loop
}

// monoRef is a reading of CLOCK_MONOTONIC and the time it was taken, so
// that the monotonic reading of any later time.Time is known.
var monoRef = func() (r struct {
	mono time.Duration
	at   time.Time
}) {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	r.mono, r.at = time.Duration(ts.Nano()), time.Now()
	return r
}()

// traceRun prints, under -trace-starts, when start i of side began and when
// its container exec'd, in seconds on CLOCK_MONOTONIC.
func traceRun(side string, i int, t0, t1 time.Time) {
	if !peer.trace {
		return
	}
	mono := func(t time.Time) float64 { return (monoRef.mono + t.Sub(monoRef.at)).Seconds() }
	fmt.Fprintf(os.Stderr, "START %s %d: %.6f → exec %.6f\n", side, i, mono(t0), mono(t1))
}

// tracePhase prints, under -trace-starts, when a phase of the scale
// benchmark with pods pods began and ended, in seconds on CLOCK_MONOTONIC:
// the window of a profile taken beside it.
func tracePhase(phase string, pods int, t0, t1 time.Time) {
	if !peer.trace {
		return
	}
	mono := func(t time.Time) float64 { return (monoRef.mono + t.Sub(monoRef.at)).Seconds() }
	fmt.Fprintf(os.Stderr, "PHASE %s %d pods: %.6f → %.6f\n", phase, pods, mono(t0), mono(t1))
}

// runcCommand is runc's command line args, after the global options every
// side shares.
func runcCommand(runc string, args ...string) *exec.Cmd {
	if peer.systemd {
		args = append([]string{"--systemd-cgroup"}, args...)
	}
	return exec.Command(runc, args...)
}

// installedCopy copies the binary under test into a new temporary directory
// and returns the copy and how to remove it. The daemon's RSS counts the
// pages of its binary that it maps, and how many one touch maps depends on
// how the file came into the page cache: Go's linker writes its output
// through a shared mapping, in large folios, and a daemon run straight from
// bin/ rested idle at 22.6 MiB where a copy of the same bytes, or the binary
// read again after the page cache was dropped, rested at 7.3-9.7 MiB (Linux
// 6.18). A copy is what an installed package or a booted machine runs.
func installedCopy(bin string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "staticpodd-bench-bin-")
	if err != nil {
		return "", nil, err
	}
	remove := func() { _ = os.RemoveAll(dir) }
	copied := filepath.Join(dir, filepath.Base(bin))
	in, err := os.Open(bin)
	if err != nil {
		remove()
		return "", nil, err
	}
	defer in.Close()
	out, err := os.OpenFile(copied, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err == nil {
		_, err = io.Copy(out, in)
		err = errors.Join(err, out.Close())
	}
	if err != nil {
		remove()
		return "", nil, fmt.Errorf("copy %s: %w", bin, err)
	}
	return copied, remove, nil
}

func run(runs int, bin, image, runc, busybox string) error {
	if bin == "" || image == "" {
		return fmt.Errorf("need -staticpodd and -image (make bench sets both)")
	}
	if _, err := exec.LookPath(runc); err != nil {
		return fmt.Errorf("runc CLI not found (apt-get install -y runc): %w", err)
	}
	dir, err := os.MkdirTemp("", "staticpodd-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sig := filepath.Join(dir, "sig")
	if err := os.MkdirAll(sig, 0o755); err != nil {
		return err
	}
	fifo := filepath.Join(sig, "fifo")
	if err := syscall.Mkfifo(fifo, 0o666); err != nil {
		return err
	}

	st, err := benchStart(runs, bin, image, runc, busybox, dir, fifo)
	if err != nil {
		return err
	}
	ours, theirs, floor, mem := st.ours, st.runc, st.floor, st.mem
	op50, op90 := pct(ours, 50), pct(ours, 90)
	rp50, rp90 := pct(theirs, 50), pct(theirs, 90)
	fp50, fp90 := pct(floor, 50), pct(floor, 90)
	fmt.Printf("manifest rename → container exec, %d runs each, hostNetwork busybox, the three sides alternating\n\n", runs)
	fmt.Printf("| | p50 | p90 |\n|---|---|---|\n")
	fmt.Printf("| staticpodd (rename → exec) | %s | %s |\n", ms(op50), ms(op90))
	fmt.Printf("| runc run -d (exec → exec) | %s | %s |\n", ms(rp50), ms(rp90))
	fmt.Printf("| libcontainer in process, the floor (exec → exec) | %s | %s |\n", ms(fp50), ms(fp90))
	fmt.Printf("| ratio staticpodd / runc | %.2f | %.2f |\n", float64(op50)/float64(rp50), float64(op90)/float64(rp90))
	fmt.Printf("| ratio staticpodd / floor | %.2f | %.2f |\n", float64(op50)/float64(fp50), float64(op90)/float64(fp90))
	if err := printExec(runs, bin, image, runc, busybox, dir); err != nil {
		return err
	}
	fmt.Printf("\nmemory, one running pod (RSS = anon + file pages shared with the binary):\n\n")
	fmt.Printf("| process | RSS | of which anon |\n|---|---|---|\n")
	fmt.Printf("| staticpodd daemon | %s | %s |\n", mib(mem.daemon.rss), mib(mem.daemon.anon))
	for i, m := range mem.monitors {
		fmt.Printf("| monitor %d | %s | %s |\n", i+1, mib(m.rss), mib(m.anon))
	}
	return nil
}

// runLogs measures the log copy (benchLogs) and prints it.
func runLogs(bin, image string, mb int) error {
	if mb <= 0 {
		return nil
	}
	if bin == "" || image == "" {
		return fmt.Errorf("need -staticpodd and -image (make bench sets both)")
	}
	dir, err := os.MkdirTemp("", "staticpodd-bench-logs-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	res, err := benchLogs(bin, image, dir, mb)
	if err != nil {
		return fmt.Errorf("logs: %w", err)
	}
	fmt.Printf("\nlog copy: %d MB of 100-byte lines from busybox seq, through the monitor into the CRI log\n\n", mb)
	fmt.Printf("| | MB/s | monitor CPU per MB | files | monitor RSS after | of which anon |\n|---|---|---|---|---|---|\n")
	for _, r := range res {
		fmt.Printf("| %s | %.0f | %.1f ms | %d | %s | %s |\n", r.name, r.mbps, r.cpuPerMB, r.files, mib(r.mem.rss), mib(r.mem.anon))
	}
	return nil
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

func pct(ds []time.Duration, p int) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	if i > 0 {
		i--
	}
	return s[i]
}

// waitFIFO opens fifo for reading, which returns once a writer opened it, and
// returns when that happened.
func waitFIFO(fifo string, timeout time.Duration) (time.Time, error) {
	timeout *= time.Duration(peer.timeoutScale)
	done := make(chan time.Time, 1)
	go func() {
		f, err := os.Open(fifo)
		t := time.Now()
		if err == nil {
			f.Close()
		}
		done <- t
	}()
	select {
	case t := <-done:
		return t, nil
	case <-time.After(timeout):
		// Unblock the reader so the goroutine ends.
		if w, err := os.OpenFile(fifo, os.O_WRONLY, 0); err == nil {
			w.Close()
		}
		<-done
		return time.Time{}, fmt.Errorf("no exec within %s", timeout)
	}
}

// usage is the memory of the daemon and of every monitor process (one per
// running container, plus the spare the runtime keeps ready).
type usage struct {
	daemon   procMem
	monitors []procMem
}

// benchDaemon is a staticpodd daemon of the benchmark, with its own dirs.
type benchDaemon struct {
	cmd       *exec.Cmd
	logs      *bytes.Buffer
	runDir    string
	rootDir   string
	manifests string
	common    []string // --root-dir, --run-dir
	podsURL   string
}

// startDaemon starts a daemon under dir, with image imported, and waits
// until it answers.
func startDaemon(bin, image, dir string, extra ...string) (*benchDaemon, error) {
	return startDaemonConfig(bin, image, dir, "", extra...)
}

// startDaemonConfig is startDaemon with config appended to the config file.
func startDaemonConfig(bin, image, dir, config string, extra ...string) (*benchDaemon, error) {
	d := &benchDaemon{
		logs:      &bytes.Buffer{},
		runDir:    filepath.Join("/run", filepath.Base(dir)),
		manifests: filepath.Join(dir, "manifests"),
	}
	root := filepath.Join(dir, "root")
	d.rootDir = root
	os.MkdirAll(d.manifests, 0o755)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	d.podsURL = fmt.Sprintf("http://127.0.0.1:%d/pods", port)
	cfg := filepath.Join(dir, "config.yaml")
	os.WriteFile(cfg, []byte(fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
address: 127.0.0.1
readOnlyPort: %d
podLogsDir: %s
cgroupRoot: /staticpodd-bench
`, d.manifests, port, filepath.Join(dir, "logs"))+cgroupDriverLine()+config), 0o644)
	d.common = []string{"--root-dir", root, "--run-dir", d.runDir}
	if out, err := exec.Command(bin, append([]string{"images", "import", image}, d.common...)...).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("import: %v: %s", err, out)
	}
	d.cmd = exec.Command(bin, slices.Concat([]string{"run", "--config", cfg, "--hostname-override", "bench"}, d.common, extra)...)
	d.cmd.Stdout, d.cmd.Stderr = d.logs, d.logs
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	// A minute: on a machine shared with other work (load average in the
	// hundreds) a start took more than 10 s.
	if err := poll(time.Minute, func() bool { n, _ := d.countPods(); return n == 0 }); err != nil {
		d.stop()
		return nil, fmt.Errorf("daemon did not come up: %v\n%s", err, d.logs.String())
	}
	return d, nil
}

// cgroupDriverLine is the config's cgroupDriver under -systemd-cgroup,
// named so that a host where systemd is not init fails rather than measures
// cgroupfs; else none: the host decides, as the packaged file leaves it.
func cgroupDriverLine() string {
	if peer.systemd {
		return "cgroupDriver: systemd\n"
	}
	return ""
}

func (d *benchDaemon) countPods() (int, error) {
	resp, err := http.Get(d.podsURL)
	if err != nil {
		return -1, err
	}
	defer resp.Body.Close()
	var list struct{ Items []json.RawMessage }
	err = json.NewDecoder(resp.Body).Decode(&list)
	return len(list.Items), err
}

// stop stops the daemon (its pods keep running) and removes its run dir.
func (d *benchDaemon) stop() {
	d.cmd.Process.Signal(syscall.SIGTERM)
	d.cmd.Wait()
	os.RemoveAll(d.runDir)
	// The pods' parent cgroup the daemon made, empty now.
	dirs, _ := filepath.Glob("/sys/fs/cgroup/*/staticpodd-bench")
	for _, dir := range dirs {
		os.Remove(dir)
	}
}

// removePods removes every manifest and waits until the pods are gone.
func (d *benchDaemon) removePods() error {
	entries, _ := os.ReadDir(d.manifests)
	for _, e := range entries {
		os.Remove(filepath.Join(d.manifests, e.Name()))
	}
	return poll(30*time.Second, func() bool { n, _ := d.countPods(); return n == 0 })
}

// startResult is what benchStart measured.
type startResult struct {
	ours, runc, floor []time.Duration
	mem               usage
}

// benchStart times manifest rename → exec against `runc run -d` and the
// in-process libcontainer floor (tests/bench/floor) of an equivalent bundle,
// one run of each side in turn, the order turning every run, so that the
// machine's moods fall on all three alike. The first round warms caches and
// is not counted.
func benchStart(runs int, bin, image, runc, busybox, dir, fifo string) (startResult, error) {
	var res startResult
	d, err := startDaemon(bin, image, dir)
	if err != nil {
		return res, err
	}
	defer d.stop()
	bundle, err := makeBundle(runc, busybox, dir, "bundle", []string{"sh", "-c", ": > /sig/fifo"}, filepath.Dir(fifo))
	if err != nil {
		return res, err
	}
	floorBin, err := floorProgram(dir)
	if err != nil {
		return res, err
	}
	runcState := filepath.Join("/run", filepath.Base(dir)+"-runc")
	defer os.RemoveAll(runcState)
	floorState := filepath.Join("/run", filepath.Base(dir)+"-floor")
	defer os.RemoveAll(floorState)
	manifest := fifoPod("bench", true, filepath.Dir(fifo), "")
	ourRun := func(i int) (time.Duration, error) {
		tmp := filepath.Join(dir, "bench.yaml")
		// A new name each run, so every run is a new pod with a new UID.
		if err := os.WriteFile(tmp, []byte(strings.Replace(manifest, "name: bench", fmt.Sprintf("name: bench%d", i), 1)), 0o644); err != nil {
			return 0, err
		}
		dst := filepath.Join(d.manifests, "bench.yaml")
		t0 := time.Now()
		if err := os.Rename(tmp, dst); err != nil {
			return 0, err
		}
		t1, err := waitFIFO(fifo, 30*time.Second)
		if err != nil {
			return 0, fmt.Errorf("staticpodd run %d: %v\n%s", i, err, d.logs.String())
		}
		os.Remove(dst)
		if err := poll(30*time.Second, func() bool { n, _ := d.countPods(); return n == 0 }); err != nil {
			return 0, fmt.Errorf("staticpodd run %d: pod not removed: %v", i, err)
		}
		traceRun("staticpodd", i, t0, t1)
		return t1.Sub(t0), nil
	}
	runcRun := func(i int) (time.Duration, error) {
		id := fmt.Sprintf("bench-%d", i)
		cmd := runcCommand(runc, "--root", runcState, "run", "-d", "--bundle", bundle, id)
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		t1, err := waitFIFO(fifo, 30*time.Second)
		cmd.Wait()
		runcCommand(runc, "--root", runcState, "delete", "-f", id).Run()
		if err != nil {
			return 0, fmt.Errorf("runc run %d: %v", i, err)
		}
		traceRun("runc", i, t0, t1)
		return t1.Sub(t0), nil
	}
	floorRun := func(i int) (time.Duration, error) {
		args := []string{floorState, bundle, fmt.Sprintf("floor-%d", i)}
		if peer.systemd {
			args = append([]string{"-systemd-cgroup"}, args...)
		}
		cmd := exec.Command(floorBin, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		t0 := time.Now()
		if err := cmd.Start(); err != nil {
			return 0, err
		}
		t1, err := waitFIFO(fifo, 30*time.Second)
		werr := cmd.Wait()
		if err != nil || werr != nil {
			return 0, fmt.Errorf("floor run %d: %v %v: %s", i, err, werr, out.String())
		}
		traceRun("floor", i, t0, t1)
		return t1.Sub(t0), nil
	}
	sides := []struct {
		run func(int) (time.Duration, error)
		out *[]time.Duration
	}{{ourRun, &res.ours}, {runcRun, &res.runc}, {floorRun, &res.floor}}
	for i := 0; i < runs+1; i++ {
		for k := range sides {
			side := sides[(i+k)%len(sides)]
			t, err := side.run(i)
			if err != nil {
				return res, err
			}
			if i > 0 {
				*side.out = append(*side.out, t)
			}
		}
	}

	// One long-running pod, to see what a running container costs.
	idle := strings.Replace(strings.Replace(manifest, "name: bench", "name: idle", 1),
		`command: ["sh", "-c", ": > /sig/fifo"]`, `command: ["sleep", "3600"]`, 1)
	tmp := filepath.Join(dir, "idle.yaml")
	os.WriteFile(tmp, []byte(idle), 0o644)
	os.Rename(tmp, filepath.Join(d.manifests, "idle.yaml"))
	defer func() {
		os.Remove(filepath.Join(d.manifests, "idle.yaml"))
		poll(30*time.Second, func() bool { n, _ := d.countPods(); return n == 0 })
	}()
	err = poll(10*time.Second, func() bool {
		res.mem = usage{daemon: memOf(d.cmd.Process.Pid), monitors: monitorsOf(d.runDir)}
		return len(res.mem.monitors) >= 1
	})
	time.Sleep(time.Second) // let the spare monitor settle too
	res.mem = usage{daemon: memOf(d.cmd.Process.Pid), monitors: monitorsOf(d.runDir)}
	return res, err
}

// floorProgram is -floor, or else tests/bench/floor built into dir.
func floorProgram(dir string) (string, error) {
	if peer.floor != "" {
		return peer.floor, nil
	}
	mod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	out := filepath.Join(dir, "floor")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./tests/bench/floor")
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(mod)))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the floor program: %v: %s", err, b)
	}
	return out, nil
}

// makeBundle makes a runc bundle dir/name of a busybox rootfs directory,
// running args with host network and sigDir bound at /sig, like the pods.
func makeBundle(runc, busybox, dir, name string, args []string, sigDir string) (string, error) {
	bundle := filepath.Join(dir, name)
	rootfs := filepath.Join(bundle, "rootfs")
	if err := bbtree.WriteDir(rootfs, busybox); err != nil {
		return "", err
	}
	if err := os.Mkdir(filepath.Join(rootfs, "sig"), 0o755); err != nil {
		return "", err
	}
	if out, err := exec.Command(runc, "spec", "--bundle", bundle).CombinedOutput(); err != nil {
		return "", fmt.Errorf("runc spec: %v: %s", err, out)
	}
	var spec map[string]any
	cfgPath := filepath.Join(bundle, "config.json")
	raw, _ := os.ReadFile(cfgPath)
	if err := json.Unmarshal(raw, &spec); err != nil {
		return "", err
	}
	proc := spec["process"].(map[string]any)
	proc["terminal"] = false
	proc["args"] = args
	spec["root"] = map[string]any{"path": "rootfs", "readonly": false}
	spec["mounts"] = append(spec["mounts"].([]any), map[string]any{
		"destination": "/sig", "type": "bind", "source": sigDir, "options": []string{"rbind", "rw"},
	})
	linux := spec["linux"].(map[string]any)
	var nss []any
	for _, ns := range linux["namespaces"].([]any) {
		if ns.(map[string]any)["type"] != "network" { // hostNetwork, like the pod
			nss = append(nss, ns)
		}
	}
	linux["namespaces"] = nss
	raw, _ = json.Marshal(spec)
	return bundle, os.WriteFile(cfgPath, raw, 0o644)
}

func poll(timeout time.Duration, f func() bool) error {
	return pollEvery(20*time.Millisecond, timeout, f)
}

// pollEvery calls f every interval until it returns true or timeout passes.
// pollEvery calls f every every until it returns true, for at most timeout
// times -timeout-scale.
func pollEvery(every, timeout time.Duration, f func() bool) error {
	timeout *= time.Duration(peer.timeoutScale)
	tick := time.NewTicker(every)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !f() {
		select {
		case <-deadline:
			return fmt.Errorf("timed out after %s", timeout)
		case <-tick.C:
		}
	}
	return nil
}

type procMem struct{ rss, anon int64 }

// memOf returns the resident set size of pid, and its anonymous part, in bytes.
func memOf(pid int) procMem {
	var m procMem
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		var kb int64
		fmt.Sscan(f[1], &kb)
		switch f[0] {
		case "VmRSS:":
			m.rss = kb << 10
		case "RssAnon:":
			m.anon = kb << 10
		}
	}
	return m
}

// monitorsOf returns the memory of the monitor processes of the daemon whose
// run directory is runDir.
func monitorsOf(runDir string) []procMem {
	var ms []procMem
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, err := os.ReadFile(p)
		if err != nil || !bytes.HasPrefix(b, []byte("staticpodd-monitor\x00")) || !bytes.Contains(b, []byte(runDir+"/")) {
			continue
		}
		var pid int
		fmt.Sscanf(p, "/proc/%d/cmdline", &pid)
		ms = append(ms, memOf(pid))
	}
	return ms
}

// fifoPod is the start benchmarks' pod: busybox opening sigDir's fifo (its
// exec is the open) and exiting, never restarted; ports are extra lines of
// the container (its ports).
func fifoPod(name string, hostNetwork bool, sigDir, ports string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  hostNetwork: %v
  restartPolicy: Never
  terminationGracePeriodSeconds: 1
  volumes:
  - name: sig
    hostPath: {path: %s}
  containers:
  - name: main
    image: busybox
    imagePullPolicy: IfNotPresent
    command: ["sh", "-c", ": > /sig/fifo"]
    volumeMounts:
    - {name: sig, mountPath: /sig}
%s`, name, hostNetwork, sigDir, ports)
}
