package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The memory benchmark (-only memory): n hostNetwork busybox pods (the scale
// benchmark's) dropped into a new daemon's directory at once, the daemon's
// RSS sampled every 50 ms from the drop until it has been at rest for
// -memory-rest after the last pod ran (the figures of the issue: at rest 60 s
// after the last event, and the peak during the burst). With -memory-peer, an
// older build of the daemon runs the same rounds, the two alternating which
// goes first, so that a change is measured against the build it changes on a
// machine whose load moves.

// memSampleEvery is how often the daemon's RSS is read during a run.
const memSampleEvery = 50 * time.Millisecond

// memRun is one run of one binary: the daemon's memory at its peak (the
// highest RSS sampled) and at rest.
type memRun struct {
	start, peak, rest procMem       // before the drop, its highest, at rest
	peakAt            time.Duration // drop → the peak
	running           time.Duration // drop → every container ran
	breakdown         memBreakdown  // at rest, with -memory-breakdown
	// From memRestAfter after the last pod ran (after the daemon's trim) to
	// the rest reading: the highest RSS sampled, so that a figure at rest
	// that a periodic drop happened to precede shows what the rest holds
	// between drops; and the daemon's CPU over that window.
	restHigh procMem
	restCPU  time.Duration
	restFor  time.Duration
}

// memRestAfter is when, after the last pod ran, the rest window starts: the
// daemon trims 10 s after the last event.
const memRestAfter = 15 * time.Second

func benchMemory(bin, peer, image, counts string, rounds int, settle, rest time.Duration, breakdown bool) error {
	if bin == "" || image == "" {
		return fmt.Errorf("need -staticpodd and -image (make bench sets both)")
	}
	type side struct {
		name string
		bin  string
	}
	sides := []side{{"this build", bin}}
	if peer != "" {
		sides = append(sides, side{"peer (-memory-peer)", peer})
	}
	dir, err := os.MkdirTemp("", "staticpodd-bench-memory-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, f := range strings.Split(counts, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return fmt.Errorf("-memory-pods %q: want positive counts", counts)
		}
		runs := make([][]memRun, len(sides))
		for r := range rounds {
			for k := range sides {
				i := (r + k) % len(sides)
				// Its base name is the daemon's run dir's (/run/NAME): unique
				// among the benchmarks running at once.
				sub, err := os.MkdirTemp(dir, fmt.Sprintf("staticpodd-bench-memory-%d-%d-%d-", n, r, i))
				if err != nil {
					return err
				}
				m, err := memoryRun(sides[i].bin, image, sub, n, settle, rest, breakdown)
				if err != nil {
					return fmt.Errorf("%s, %d pods: %w", sides[i].name, n, err)
				}
				runs[i] = append(runs[i], m)
				if breakdown {
					fmt.Printf("\n%s, %d pods, round %d, at rest: RSS %s (anon %s)\n", sides[i].name, n, r+1, mib(m.rest.rss), mib(m.rest.anon))
					m.breakdown.print(os.Stdout)
				}
			}
		}
		fmt.Printf("\ndaemon memory, %d pods dropped at once %s after the daemon answered, %d rounds (the sides alternating which goes first); RSS (of which anon), median and min–max over the rounds; load average at the end: %s\n\n", n, settle, rounds, loadavg())
		fmt.Printf("| daemon | all running after | RSS before the drop | peak RSS (its time after the drop) | at rest, %s after the last pod ran | highest from %s after to the rest | CPU over that window | peak / rest |\n|---|---|---|---|---|---|---|---|\n", rest, memRestAfter)
		for i, s := range sides {
			rs := runs[i]
			ratios := make([]float64, len(rs))
			for j, m := range rs {
				ratios[j] = float64(m.peak.rss) / float64(m.rest.rss)
			}
			fmt.Printf("| %s | %s | %s | %s (%s) | %s | %s | %s | %s |\n", s.name,
				spread(collect(rs, func(m memRun) time.Duration { return m.running })),
				memSpread(rs, func(m memRun) procMem { return m.start }),
				memSpread(rs, func(m memRun) procMem { return m.peak }),
				spread(collect(rs, func(m memRun) time.Duration { return m.peakAt })),
				memSpread(rs, func(m memRun) procMem { return m.rest }),
				memSpread(rs, func(m memRun) procMem { return m.restHigh }),
				spread(collect(rs, func(m memRun) time.Duration { return m.restCPU })),
				ratioSpread(ratios))
		}
	}
	return nil
}

// memoryRun starts a daemon of bin under sub, drops n pods at once settle
// after it answered, and samples its memory until it has rested for rest
// after the last pod ran. breakdown: take its memory at rest apart, with the
// Go runtime's accounts if bin was built with -tags benchprofile.
func memoryRun(bin, image, sub string, n int, settle, rest time.Duration, breakdown bool) (memRun, error) {
	var m memRun
	sig := filepath.Join(sub, "sig")
	staged := filepath.Join(sub, "staged")
	for _, p := range []string{sig, staged} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return m, err
		}
	}
	pprof := ""
	if breakdown {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return m, err
		}
		pprof = l.Addr().String()
		l.Close()
		os.Setenv("STATICPODD_BENCH_PPROF", pprof) // read by a benchprofile build alone
		defer os.Unsetenv("STATICPODD_BENCH_PPROF")
	}
	d, err := startDaemon(bin, image, sub)
	if err != nil {
		return m, err
	}
	defer d.stop()
	defer d.removePods()
	for i := range n {
		if err := os.WriteFile(filepath.Join(staged, fmt.Sprintf("scale%03d.yaml", i)), []byte(scaleManifest(i, sig)), 0o644); err != nil {
			return m, err
		}
	}
	time.Sleep(settle)
	m.start = memOf(d.cmd.Process.Pid)
	t0 := time.Now()
	s := sampleMem(d.cmd.Process.Pid)
	defer s.stop()
	for i := range n {
		name := fmt.Sprintf("scale%03d.yaml", i)
		if err := os.Rename(filepath.Join(staged, name), filepath.Join(d.manifests, name)); err != nil {
			return m, err
		}
	}
	if err := waitFiles(sig, n, 5*time.Minute); err != nil {
		return m, fmt.Errorf("burst: %v\n%s", err, d.logs.String())
	}
	m.running = time.Since(t0)
	// The last events: each pod's status Running.
	if err := pollEvery(5*time.Millisecond, time.Minute, func() bool {
		_, err := d.running(n)
		return err == nil
	}); err != nil {
		return m, fmt.Errorf("burst: %v", err)
	}
	pid := d.cmd.Process.Pid
	var cpu0 time.Duration
	var high *memSampler
	if rest > memRestAfter {
		time.Sleep(memRestAfter)
		high, m.restFor = sampleMem(pid), rest-memRestAfter
		cpu0, _ = cpuOf(pid)
		time.Sleep(rest - memRestAfter)
	} else {
		time.Sleep(rest)
	}
	m.rest = memOf(pid)
	m.peak, m.peakAt = s.stop(), s.at.Sub(t0)
	if high != nil {
		m.restHigh = high.stop()
		cpu1, _ := cpuOf(pid)
		m.restCPU = cpu1 - cpu0
	}
	if breakdown {
		if !strings.Contains(bin, "benchprofile") {
			pprof = ""
		}
		if m.breakdown, err = breakdownOf(d.cmd.Process.Pid, d.cmd.Path, pprof); err != nil {
			return m, fmt.Errorf("breakdown: %w", err)
		}
	}
	return m, nil
}

// memSampler reads a process's memory every memSampleEvery and keeps the
// highest RSS seen.
type memSampler struct {
	done chan struct{}
	wg   sync.WaitGroup
	peak procMem
	at   time.Time // of the peak
}

func sampleMem(pid int) *memSampler {
	s := &memSampler{done: make(chan struct{})}
	trace := os.Getenv("STATICPODD_BENCH_MEMTRACE") != "" // each sample to stderr
	t0 := time.Now()
	s.wg.Go(func() {
		tick := time.NewTicker(memSampleEvery)
		defer tick.Stop()
		for {
			m := memOf(pid)
			if m.rss > s.peak.rss {
				s.peak, s.at = m, time.Now()
			}
			if trace {
				fmt.Fprintf(os.Stderr, "memtrace pid %d %6d ms rss %s anon %s\n", pid, time.Since(t0).Milliseconds(), mib(m.rss), mib(m.anon))
			}
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	})
	return s
}

// stop ends the sampling, once, and returns the peak.
func (s *memSampler) stop() procMem {
	select {
	case <-s.done:
	default:
		close(s.done)
	}
	s.wg.Wait()
	return s.peak
}

func collect[T any](rs []memRun, f func(memRun) T) []T {
	out := make([]T, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

// memSpread is the median RSS (its anon part) and the RSS's min–max.
func memSpread(rs []memRun, f func(memRun) procMem) string {
	ms := collect(rs, f)
	slices.SortFunc(ms, func(a, b procMem) int { return int(a.rss - b.rss) })
	med := ms[(len(ms)-1)/2]
	if len(ms) == 1 {
		return fmt.Sprintf("%s (%s)", mib(med.rss), mib(med.anon))
	}
	return fmt.Sprintf("%s (%s), %s–%s", mib(med.rss), mib(med.anon), mib(ms[0].rss), mib(ms[len(ms)-1].rss))
}

func ratioSpread(fs []float64) string {
	fs = slices.Clone(fs)
	slices.Sort(fs)
	med := fs[(len(fs)-1)/2]
	if len(fs) == 1 {
		return fmt.Sprintf("%.2f", med)
	}
	return fmt.Sprintf("%.2f, %.2f–%.2f", med, fs[0], fs[len(fs)-1])
}
