package prober

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
)

// script is an exec handler whose result each command name takes from a
// list, one per probe, and that records when each was probed.
type script struct {
	mu      sync.Mutex
	results map[string][]int // exit codes, the last one repeats
	probed  map[string][]time.Duration
	start   time.Time
}

func newScript(results map[string][]int) *script {
	return &script{results: results, probed: map[string][]time.Duration{}, start: time.Now()}
}

func (s *script) exec(ctx context.Context, cmd []string, out io.Writer) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	name := cmd[0]
	s.probed[name] = append(s.probed[name], time.Since(s.start))
	codes := s.results[name]
	code := codes[0]
	if len(codes) > 1 {
		s.results[name] = codes[1:]
	}
	if code < 0 {
		return -1, errors.New("connection to the exec server lost") // an exec that could not be run
	}
	return code, nil
}

func execProbe(name string, period, success, failure int32) *v1.Probe {
	return &v1.Probe{ProbeHandler: v1.ProbeHandler{Exec: &v1.ExecAction{Command: []string{name}}},
		TimeoutSeconds: 1, PeriodSeconds: period, SuccessThreshold: success, FailureThreshold: failure}
}

type updates struct {
	mu   sync.Mutex
	list []Update
	at   []time.Duration
	t0   time.Time
}

func (u *updates) report(x Update) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.list = append(u.list, x)
	u.at = append(u.at, time.Since(u.t0))
}

func (u *updates) String() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	// Probes of different kinds at the same moment report in any order.
	var lines []string
	for i, x := range u.list {
		lines = append(lines, fmt.Sprintf("%08d %s=%s@%v ", u.at[i]/time.Millisecond, x.Kind, x.Result, u.at[i]))
	}
	sort.Strings(lines)
	s := ""
	for _, l := range lines {
		s += l[9:]
	}
	return s
}

func run(t *testing.T, cfg Config, d time.Duration) *updates {
	t.Helper()
	u := &updates{t0: time.Now()}
	cfg.Report = u.report
	cfg.Logger = slog.New(slog.DiscardHandler)
	cfg.ContainerID = "c1"
	if cfg.StartedAt.IsZero() {
		cfg.StartedAt = time.Now()
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	Run(ctx, cfg)
	return u
}

// Readiness: reported only once a run of results reaches its threshold, and
// only when it changes.
func TestReadinessThresholds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(map[string][]int{"ready": {1, 0, 0, 0, 1, 1, 1, 0}})
		defer func() {
			if got := s.probed["ready"]; len(got) < 3 || got[1] != 50*time.Millisecond || got[2] != 150*time.Millisecond {
				t.Errorf("probed at %v, want 0, 50ms, 150ms, then every period", got)
			}
		}()
		u := run(t, Config{Target: &Target{Exec: s.exec}, Readiness: execProbe("ready", 10, 2, 3)}, 75*time.Second)
		// Until it first passes, tries come 50 ms, 100 ms... apart: 1 at 0,
		// 0 at 50 ms and 0 at 150 ms make two successes in a row. Then one
		// a period: 0 at 10s, 1 at 20, 30 and 40s make three failures; 0 at
		// 50 and 60s two successes.
		if got, want := u.String(), "readiness=success@150ms readiness=failure@40s readiness=success@1m0s "; got != want {
			t.Errorf("updates %q, want %q", got, want)
		}
	})
}

// Startup gates liveness and readiness, then stops; initialDelaySeconds
// holds every probe back.
func TestStartupGatesTheOthers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(map[string][]int{"start": {1, 1, 0}, "live": {0}, "ready": {0}})
		startup := execProbe("start", 5, 1, 10)
		startup.InitialDelaySeconds = 3
		u := run(t, Config{Target: &Target{Exec: s.exec}, Startup: startup,
			Liveness: execProbe("live", 10, 1, 3), Readiness: execProbe("ready", 10, 1, 3)}, 41*time.Second)
		// Startup ticks at 0 (before its delay), 5, 10, 15: 1 1 0.
		if got := s.probed["start"]; len(got) != 3 || got[0] != 5*time.Second || got[2] != 15*time.Second {
			t.Errorf("startup probed at %v, want 5s, 10s, 15s and never after it passed", got)
		}
		// The others tick at 0, 10, 20...: they probe from 20s on.
		if got := s.probed["live"]; len(got) != 3 || got[0] != 20*time.Second {
			t.Errorf("liveness probed at %v, want 20s, 30s, 40s", got)
		}
		if got, want := u.String(), "startup=success@15s liveness=success@20s readiness=success@20s "; got != want {
			t.Errorf("updates %q, want %q", got, want)
		}
	})
}

// A liveness failure past its threshold is reported once and ends every
// probe of the container.
func TestLivenessFailureStopsProbing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newScript(map[string][]int{"live": {0, 1, 1, 1}, "ready": {0}})
		begin := time.Now()
		u := run(t, Config{Target: &Target{Exec: s.exec}, Liveness: execProbe("live", 1, 1, 3), Readiness: execProbe("ready", 1, 1, 1)}, time.Hour)
		if took := time.Since(begin); took != 3*time.Second {
			t.Errorf("Run returned after %v, want 3s (the third failure)", took)
		}
		if got, want := u.String(), "liveness=success@0s readiness=success@0s liveness=failure@3s "; got != want {
			t.Errorf("updates %q, want %q", got, want)
		}
	})
}

// Jitter puts the first probe somewhere in the first period, not at once.
func TestJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var firsts []time.Duration
		for range 20 {
			s := newScript(map[string][]int{"ready": {0}})
			run(t, Config{Target: &Target{Exec: s.exec}, Readiness: execProbe("ready", 10, 1, 1), Jitter: true}, 10*time.Second)
			if len(s.probed["ready"]) == 0 {
				t.Fatal("never probed in the first period")
			}
			firsts = append(firsts, s.probed["ready"][0])
		}
		spread := false
		for _, f := range firsts {
			if f < 0 || f >= 10*time.Second {
				t.Errorf("first probe at %v", f)
			}
			spread = spread || f != firsts[0]
		}
		if !spread {
			t.Errorf("every first probe at %v: no jitter", firsts[0])
		}
	})
}

// A probe that could not be made (an exec the runtime could not run: the
// container gone, the exec server lost as the daemon is killed) is tried
// three times at once, then thrown away as the kubelet's prober does: a
// ready container stays ready, a live one is not restarted, and probing
// goes on. Errored is told once each time a probe starts to err; what the
// probes say then counts as before.
func TestErroredProbeIsThrownAway(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const e = -1
		s := newScript(map[string][]int{
			"live":  {e, e, e, e, e, e, 0, e, e, e, 1},
			"ready": {e, e, e, e, e, e, e, e, e, 1},
		})
		var mu sync.Mutex
		var errored []string
		u := run(t, Config{Target: &Target{Exec: s.exec}, Ready: true,
			Liveness: execProbe("live", 1, 1, 1), Readiness: execProbe("ready", 1, 1, 1),
			Errored: func(k Kind, r Result, err error) {
				mu.Lock()
				defer mu.Unlock()
				errored = append(errored, fmt.Sprintf("%s@%v: %v %v", k, time.Since(s.start), r, err))
			}}, 3500*time.Millisecond)
		// Probes at 0, 1, 2 and 3 s. Liveness: two thrown away, a success,
		// one thrown away. Readiness, ready as the daemon before left it:
		// three thrown away, then a failure past its threshold of 1.
		if got, want := u.String(), "liveness=success@2s readiness=failure@3s "; got != want {
			t.Errorf("updates %q, want %q", got, want)
		}
		if got := len(s.probed["live"]); got != 10 {
			t.Errorf("liveness tried %d times, want 10 (three at each errored probe)", got)
		}
		sort.Strings(errored)
		want := []string{
			"liveness@0s: unknown connection to the exec server lost",
			"liveness@3s: unknown connection to the exec server lost",
			"readiness@0s: unknown connection to the exec server lost",
		}
		if fmt.Sprint(errored) != fmt.Sprint(want) {
			t.Errorf("errored %q, want %q", errored, want)
		}
	})
}
