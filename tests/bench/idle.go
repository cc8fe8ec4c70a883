package main

import (
	"bufio"
	"errors"
	"fmt"
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

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The idle benchmark (-only idle): n hostNetwork busybox pods running, the
// daemon at rest (restAfter past the burst), then over a window:
//
//   - wake-ups per minute of the daemon and of all the monitors: how many
//     times their threads were put on a CPU (/proc/PID/task/*/schedstat,
//     its third field), which counts every wake-up whatever woke it (a
//     timer, a pipe, the Go runtime's own threads);
//   - their CPU, the same file's first field (ns, not 10 ms ticks);
//   - with -idle-traced, for builds with the benchtrace tag, which goroutine
//     each wake-up woke (a runtime trace of the window): the goroutine
//     woken by no other goroutine (by a timer or the network poller) is
//     named by the function of this module it was blocked in.
//
// With -idle-old the binary built from main runs too, the two alternating
// which goes first over -idle-rounds.

type idleSide struct {
	name, bin string
	got       []idleSample
}

type idleSample struct {
	daemonRuns, monitorRuns float64 // per minute
	daemonCPU, monitorCPU   float64 // % of a core
	monitors                int
	rssKiB, anonKiB         float64 // the daemon's VmRSS and RssAnon at the window's end
	// From the daemon's own /metrics, per minute: what it allocated (bytes,
	// objects) and the collector's cycles. What it allocated drives the
	// collector and does not depend on the machine's load.
	allocBytes, allocObjects, gcCycles float64
}

func benchIdle(bin, old, image string, pods, rounds int, window time.Duration, traced string) error {
	dir, err := os.MkdirTemp("", "staticpodd-bench-idle-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sides := []idleSide{{name: "new", bin: bin}}
	if old != "" {
		sides = append(sides, idleSide{name: "old (main)", bin: old})
	}
	for r := range rounds {
		for i := range sides {
			s := &sides[(i+r)%len(sides)]
			fmt.Fprintf(os.Stderr, "idle: round %d, %s, load %s\n", r, s.name, loadavg())
			got, err := idleRun(s.bin, image, filepath.Join(dir, fmt.Sprintf("idle-%s%d", s.name[:3], r)), pods, window, "")
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			s.got = append(s.got, got)
			fmt.Fprintf(os.Stderr, "idle: %s: %+v\n", s.name, got)
		}
	}
	if rounds > 0 {
		printIdle(sides, pods, rounds, window)
	}
	for _, lb := range strings.Split(traced, ",") {
		if lb == "" {
			continue
		}
		label, path, ok := strings.Cut(lb, "=")
		if !ok {
			return fmt.Errorf("-idle-traced %q: want label=binary", lb)
		}
		trace := filepath.Join(dir, label+".trace")
		fmt.Fprintf(os.Stderr, "idle: traced %s, load %s\n", label, loadavg())
		if _, err := idleRun(path, image, filepath.Join(dir, "idle-traced-"+label), pods, window, trace); err != nil {
			return fmt.Errorf("traced %s: %w", label, err)
		}
		srcs, err := wakeSources(trace)
		if err != nil {
			return err
		}
		fmt.Printf("\nGoroutine wake-ups per minute by source, %s (%s, runtime trace of a %s window; the trace's own goroutines left out), and the time its goroutines ran (on a P, not in syscalls; woken by whatever)\n\n| source | wake-ups per minute | ran, ms per minute |\n|---|---|---|\n", label, path, window)
		for _, s := range srcs {
			fmt.Printf("| %s | %.1f | %.2f |\n", s.name, float64(s.n)/window.Minutes(), float64(s.run.Microseconds())/1000/window.Minutes())
		}
		// What the window allocated, which is what the collector's cycles
		// are for.
		top, err := exec.Command("go", "tool", "pprof", "-top", "-nodecount=15", "-sample_index=alloc_space",
			"-base", trace+".allocs0", trace+".allocs1").CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof: %v: %s", err, top)
		}
		fmt.Printf("\nAllocated in the window, %s (go tool pprof -top -sample_index=alloc_space):\n\n```\n%s```\n", label, top)
		// The trace's own buffers lead the list above: this module's
		// frames alone, by what they and their callees allocated.
		top, err = exec.Command("go", "tool", "pprof", "-top", "-cum", "-nodecount=40", "-sample_index=alloc_space",
			"-focus=github.com/staticpodd/", "-base", trace+".allocs0", trace+".allocs1").CombinedOutput()
		if err != nil {
			return fmt.Errorf("go tool pprof: %v: %s", err, top)
		}
		fmt.Printf("\nAllocated in the window by this module's code, %s (go tool pprof -top -cum -focus=github.com/staticpodd/ -sample_index=alloc_space):\n\n```\n%s```\n", label, top)
		if keep := os.Getenv("STATICPODD_BENCH_KEEP"); keep != "" {
			for _, f := range []string{".allocs0", ".allocs1"} {
				if b, err := os.ReadFile(trace + f); err == nil {
					os.WriteFile(filepath.Join(keep, label+f), b, 0o644)
				}
			}
		}
	}
	return nil
}

func printIdle(sides []idleSide, pods, rounds int, window time.Duration) {
	fmt.Printf("\nIdle: %d pods running, at rest (%s after the burst), %s windows, %d rounds alternating; median (min–max); load average %s\n\n",
		pods, restAfter, window, rounds, loadavg())
	fmt.Printf("| figure |")
	for _, s := range sides {
		fmt.Printf(" %s |", s.name)
	}
	fmt.Printf("\n|---|%s\n", strings.Repeat("---|", len(sides)))
	row := func(name, format string, f func(idleSample) float64) {
		fmt.Printf("| %s |", name)
		for _, s := range sides {
			var v []float64
			for _, g := range s.got {
				v = append(v, f(g))
			}
			slices.Sort(v)
			med := (v[(len(v)-1)/2] + v[len(v)/2]) / 2
			fmt.Printf(" "+format+" ("+format+"–"+format+") |", med, v[0], v[len(v)-1])
		}
		fmt.Println()
	}
	row("daemon wake-ups per minute (thread runs)", "%.0f", func(g idleSample) float64 { return g.daemonRuns })
	row("daemon CPU, % of a core", "%.4f", func(g idleSample) float64 { return g.daemonCPU })
	row(fmt.Sprintf("all %d monitors' wake-ups per minute", pods), "%.0f", func(g idleSample) float64 { return g.monitorRuns })
	row("all monitors' CPU, % of a core", "%.4f", func(g idleSample) float64 { return g.monitorCPU })
	row("daemon allocated per minute, KiB (its /metrics)", "%.0f", func(g idleSample) float64 { return g.allocBytes / 1024 })
	row("daemon allocated per minute, objects (its /metrics)", "%.0f", func(g idleSample) float64 { return g.allocObjects })
	row("daemon GC cycles per minute (its /metrics)", "%.1f", func(g idleSample) float64 { return g.gcCycles })
	row("daemon VmRSS at the window's end, MiB", "%.1f", func(g idleSample) float64 { return g.rssKiB / 1024 })
	row("daemon RssAnon at the window's end, MiB", "%.1f", func(g idleSample) float64 { return g.anonKiB / 1024 })

}

func loadavg() string {
	b, _ := os.ReadFile("/proc/loadavg")
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// idleRun starts a daemon on dir (its run dir /run/<base of dir>, so the
// base names this benchmark's), runs pods pods, waits for rest and
// measures the window. With trace set, the daemon (a benchtrace build)
// traces the window into that file.
func idleRun(bin, image, dir string, pods int, window time.Duration, trace string) (idleSample, error) {
	var s idleSample
	sig := filepath.Join(dir, "sig")
	if err := os.MkdirAll(sig, 0o755); err != nil {
		return s, err
	}
	if trace != "" {
		os.Setenv("STATICPODD_BENCH_TRACE", trace)
		defer os.Unsetenv("STATICPODD_BENCH_TRACE")
	}
	// No healthz port: another daemon on the machine may hold 10248, and
	// this one would retry its bind, waking, for the whole window.
	d, err := startDaemonConfig(bin, image, dir, "healthzPort: 0\n")
	if err != nil {
		return s, err
	}
	defer d.stop()
	// Every pod gone before the daemon stops, however long that takes on a
	// loaded machine (removePods waits 30 s): a daemon stopped with pods
	// left leaves their mounts under its run dir.
	defer func() {
		d.removePods()
		pollEvery(100*time.Millisecond, 5*time.Minute, func() bool {
			// Not nothingLeft: the cgroup root is every bench daemon's on
			// the machine.
			n, err := d.countPods()
			pods, _ := os.ReadDir(filepath.Join(d.runDir, "pods"))
			return err == nil && n == 0 && len(pods) == 0
		})
	}()
	for i := range pods {
		name := fmt.Sprintf("scale%03d.yaml", i)
		staged := filepath.Join(dir, name)
		if err := os.WriteFile(staged, []byte(scaleManifest(i, sig)), 0o644); err != nil {
			return s, err
		}
		if err := os.Rename(staged, filepath.Join(d.manifests, name)); err != nil {
			return s, err
		}
	}
	if err := waitFiles(sig, pods, 5*time.Minute); err != nil {
		return s, fmt.Errorf("%d pods: %v\n%s", pods, err, d.logs.String())
	}
	if err := pollEvery(50*time.Millisecond, time.Minute, func() bool { _, err := d.running(pods); return err == nil }); err != nil {
		return s, err
	}
	time.Sleep(restAfter)
	pid := d.cmd.Process.Pid
	monitors := slices.DeleteFunc(monitorPids(d.runDir), isSpare)
	s.monitors = len(monitors)
	base := strings.TrimSuffix(d.podsURL, "/pods")
	// Two scrapes back to back: what the second counted past the first is
	// about what one scrape allocates, taken off the window's figure, whose
	// first scrape's encoding falls inside it. (A traced run's figures
	// count the trace's too, and are not shown.)
	g0a, err := readGoMetrics(base)
	if err != nil {
		return s, err
	}
	g0, err := readGoMetrics(base)
	if err != nil {
		return s, err
	}
	if trace != "" {
		if err := d.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
			return s, err
		}
	}
	dRuns0, dCPU0 := schedstat([]int{pid})
	mRuns0, mCPU0 := schedstat(monitors)
	t0 := time.Now()
	time.Sleep(window)
	dRuns, dCPU := schedstat([]int{pid})
	mRuns, mCPU := schedstat(monitors)
	el := time.Since(t0)
	s.rssKiB, s.anonKiB = float64(statusKiB(pid, "VmRSS")), float64(statusKiB(pid, "RssAnon"))
	if trace != "" {
		if err := d.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
			return s, err
		}
		// The trace is written once it stopped: its file stops growing.
		var last int64 = -1
		if err := pollEvery(200*time.Millisecond, 30*time.Second, func() bool {
			fi, err := os.Stat(trace)
			if err != nil {
				return false
			}
			same := fi.Size() == last && fi.Size() > 0
			last = fi.Size()
			return same
		}); err != nil {
			return s, fmt.Errorf("trace: %v", err)
		}
	}
	g1, err := readGoMetrics(base)
	if err != nil {
		return s, err
	}
	s.allocBytes = max(0, g1.allocBytes-g0.allocBytes-(g0.allocBytes-g0a.allocBytes)) / el.Minutes()
	s.allocObjects = max(0, g1.mallocs-g0.mallocs-(g0.mallocs-g0a.mallocs)) / el.Minutes()
	s.gcCycles = (g1.gcs - g0.gcs) / el.Minutes()
	s.daemonRuns = float64(dRuns-dRuns0) / el.Minutes()
	s.monitorRuns = float64(mRuns-mRuns0) / el.Minutes()
	s.daemonCPU = 100 * float64(dCPU-dCPU0) / float64(el)
	s.monitorCPU = 100 * float64(mCPU-mCPU0) / float64(el)
	return s, nil
}

// schedstat sums, over every thread of pids, the times a thread was put on
// a CPU and its CPU time. A thread that exits within the window takes its
// counts with it: the daemon's idle threads park rather than exit.
func schedstat(pids []int) (runs int64, cpu time.Duration) {
	for _, pid := range pids {
		tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
		for _, t := range tasks {
			b, err := os.ReadFile(t)
			if err != nil {
				continue
			}
			f := strings.Fields(string(b))
			if len(f) < 3 {
				continue
			}
			ns, _ := strconv.ParseInt(f[0], 10, 64)
			n, _ := strconv.ParseInt(f[2], 10, 64)
			runs += n
			cpu += time.Duration(ns)
		}
	}
	return runs, cpu
}

type wakeSource struct {
	name string
	n    int
	run  time.Duration // running on a P, woken by whatever
}

// wakeSources reads a runtime trace (go tool trace -d=parsed) and counts
// the goroutines made runnable by no goroutine (G=-1: a timer fired, the
// network poller saw a file ready, the runtime's own helpers) or by a
// time.AfterFunc's, each named
// after the stack it was blocked in: the first function of this module in
// it, else the first outside the runtime, else the goroutine's own
// function. A goroutine blocked since before the trace began has no stack
// for its first wake-up; it takes the stack it blocks in next.
func wakeSources(trace string) ([]wakeSource, error) {
	cmd := exec.Command("go", "tool", "trace", "-d=parsed", trace)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	count := map[string]int{}
	pending := map[string]int{} // goroutine -> wake-ups not named yet
	blocked := map[string]string{}
	// Goroutines the runtime started on its own: a time.AfterFunc's (as
	// agent/tick's); the goroutine such a one wakes is woken by the timer.
	afterFunc := map[string]bool{}
	// Each goroutine's time running (not in syscalls), named at the end
	// after the last stack it blocked in.
	ranSince, ran := map[string]int64{}, map[string]int64{}
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var stackOf string // the goroutine whose stack the lines that follow are
	var frames []string
	name := func() {
		if stackOf == "" || len(frames) == 0 { // Waiting->Waiting, Undetermined->Waiting: no stack
			stackOf, frames = "", nil
			return
		}
		src := stackName(frames)
		blocked[stackOf] = src
		count[src] += pending[stackOf]
		delete(pending, stackOf)
		stackOf, frames = "", nil
	}
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "\t\t"): // a frame's file:line
		case strings.HasPrefix(line, "\t"):
			if stackOf != "" {
				fn, _, _ := strings.Cut(strings.TrimSpace(line), " @ ")
				frames = append(frames, fn)
			}
		case line == "TransitionStack=":
		case strings.HasPrefix(line, "Stack="):
			name()
		default:
			name()
			if strings.Contains(line, ` RangeBegin `) && strings.Contains(line, `Name="GC concurrent mark phase"`) {
				count[gcCycles]++
			}
			if !strings.Contains(line, " StateTransition ") {
				continue
			}
			goid, by := field(line, "GoID="), field(line, " G=")
			at, _ := strconv.ParseInt(field(line, "Time="), 10, 64)
			if from, to, ok := transition(line); ok && goid != "" {
				if to == "Running" {
					ranSince[goid] = at
				} else if from == "Running" && ranSince[goid] != 0 {
					ran[goid] += at - ranSince[goid]
					ranSince[goid] = 0
				}
			}
			switch {
			case strings.Contains(line, "->Waiting "):
				stackOf = goid
			case by == "-1" && strings.Contains(line, " NotExist->Runnable "):
				afterFunc[goid] = true
			case (by == "-1" || afterFunc[by]) && strings.Contains(line, " Waiting->Runnable "):
				if src, ok := blocked[goid]; ok {
					count[src]++
				} else {
					pending[goid]++
				}
			}
		}
	}
	name()
	if err := errors.Join(sc.Err(), cmd.Wait()); err != nil {
		return nil, fmt.Errorf("go tool trace -d=parsed %s: %w", trace, err)
	}
	for _, n := range pending {
		count["(woken once, never blocked again in the window)"] += n
	}
	runs := map[string]time.Duration{}
	for g, ns := range ran {
		src, ok := blocked[g]
		switch {
		case ok:
		case afterFunc[g]:
			src = "(time.AfterFunc callbacks)"
		default:
			src = "(never blocked in the window)"
		}
		runs[src] += time.Duration(ns)
	}
	var srcs []wakeSource
	for k := range count {
		if _, ok := runs[k]; !ok {
			runs[k] = 0
		}
	}
	for k, d := range runs {
		if k != traceItself && (count[k] > 0 || d > 0) {
			srcs = append(srcs, wakeSource{k, count[k], d})
		}
	}
	sort.Slice(srcs, func(i, j int) bool {
		if srcs[i].n != srcs[j].n {
			return srcs[i].n > srcs[j].n
		}
		if srcs[i].run != srcs[j].run {
			return srcs[i].run > srcs[j].run
		}
		return srcs[i].name < srcs[j].name
	})
	return srcs, nil
}

const (
	traceItself = "(the trace)"
	// gcCycles counts the collector's cycles, whose workers' wake-ups are
	// runtime.gcBgMarkWorker's.
	gcCycles = "(GC cycles, not wake-ups: each wakes the mark workers)"
)

func stackName(frames []string) string {
	for _, f := range frames {
		if strings.HasPrefix(f, "runtime.traceStartReadCPU") || strings.HasPrefix(f, "runtime.(*traceAdvancerState)") || strings.HasPrefix(f, "runtime/trace.") ||
			strings.Contains(f, "staticpodd/daemon.init.") {
			return traceItself
		}
	}
	for _, f := range frames {
		if rest, ok := strings.CutPrefix(f, "github.com/staticpodd/staticpodd/"); ok {
			return rest
		}
	}
	for _, f := range frames {
		if !strings.HasPrefix(f, "runtime.") && !strings.HasPrefix(f, "internal/") && !strings.HasPrefix(f, "sync.") && !strings.HasPrefix(f, "time.") {
			return f
		}
	}
	if len(frames) > 0 {
		return frames[len(frames)-1]
	}
	return "(no stack)"
}

// transition is a StateTransition line's "From->To".
func transition(line string) (from, to string, ok bool) {
	for _, f := range strings.Fields(line) {
		if a, b, found := strings.Cut(f, "->"); found && !strings.Contains(f, "=") {
			return a, b, true
		}
	}
	return "", "", false
}

// field is the value of key (with its "=") in a trace line.
func field(line, key string) string {
	_, v, ok := strings.Cut(line, key)
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, " ")
	return v
}

type goMetrics struct{ allocBytes, mallocs, gcs float64 }

// metricsClient asks for /metrics uncompressed: the server's gzip writers
// (about 430 KiB each) come from a pool the collector empties, so whether
// a scrape made one depended on when the last cycle ran, and the scrape's
// own cost, taken off the window's figure, moved by as much.
var metricsClient = &http.Client{Transport: &http.Transport{DisableCompression: true}}

// readGoMetrics reads the daemon's go_memstats_alloc_bytes_total,
// go_memstats_mallocs_total and go_gc_duration_seconds_count from its
// /metrics on base (the read-only port).
func readGoMetrics(base string) (goMetrics, error) {
	var g goMetrics
	resp, err := metricsClient.Get(base + "/metrics")
	if err != nil {
		return g, err
	}
	defer resp.Body.Close()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return g, err
	}
	for name, v := range map[string]*float64{"go_memstats_alloc_bytes_total": &g.allocBytes, "go_memstats_mallocs_total": &g.mallocs, "go_gc_duration_seconds_count": &g.gcs} {
		f := fams[strings.TrimSuffix(name, "_count")]
		if f == nil || len(f.Metric) == 0 {
			return g, fmt.Errorf("%s/metrics has no %s", base, name)
		}
		if m := f.Metric[0]; m.GetSummary() != nil {
			*v = float64(m.GetSummary().GetSampleCount())
		} else {
			*v = m.GetCounter().GetValue()
		}
	}
	return g, nil
}
