package prober

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Kind of probe.
type Kind string

const (
	Startup   Kind = "startup"
	Liveness  Kind = "liveness"
	Readiness Kind = "readiness"
)

// Update is a probe's result for a container, once a run of results reached
// the probe's threshold and changed what the probe says.
type Update struct {
	ContainerID string
	Kind        Kind
	Result      Result
	Output      string // the last probe's output: why it failed
	At          time.Time
}

// CountKey names one series of the prober_probe_total counter: the probes
// of one kind of one container with one result.
type CountKey struct {
	Namespace, Pod, UID, Container string
	Probe                          Kind
	Result                         Result
}

// Status is the last result of one probe of one container, for
// `staticpodd ps -o wide`.
type Status struct {
	Namespace string    `json:"namespace"`
	Pod       string    `json:"pod"`
	Container string    `json:"container"`
	Probe     Kind      `json:"probe"`
	Result    string    `json:"result"`
	Output    string    `json:"output,omitempty"`
	At        time.Time `json:"at"`
}

// Config is one container instance's probes.
type Config struct {
	ContainerID string
	StartedAt   time.Time // initialDelaySeconds counts from here
	Target      *Target
	Startup     *v1.Probe
	Liveness    *v1.Probe
	Readiness   *v1.Probe
	// Jitter makes each probe wait a random part of its period before the
	// first try, so that the probes of many containers found running at
	// start do not all fire at once (the kubelet's, after a restart).
	Jitter bool
	// Started and Ready are what the probes of an earlier daemon last said
	// of this container, found running at start: a startup probe that had
	// passed is not run again, and a readiness probe that passed counts as
	// passing until it fails failureThreshold times (the kubelet keeps both
	// across its restarts).
	Started, Ready bool
	// Report is called, from the probes' goroutines, with each Update. It
	// must not block for long.
	Report func(Update)
	// Observe, when set, is called with the result of every probe made,
	// for the prober_probe_total counter; it must not block.
	Observe func(Kind, Result)
	// Errored, when set, is called when a probe starts to err: it could
	// not be made at all (the kubelet's "probe errored"), with the result
	// Do gave with the error; it is called again only after a probe made
	// in between. It must not block.
	Errored func(Kind, Result, error)
	Logger  *slog.Logger
}

// failureLogEvery rate-limits the log of failed probes below their threshold.
const failureLogEvery = time.Minute

// Run probes the container until ctx ends, or a liveness or startup probe
// fails past its threshold (the container is to be restarted; its next
// instance gets a new Run). Liveness and readiness wait until the startup
// probe, if any, has succeeded; the startup probe stops then (the kubelet's
// prober worker.doProbe).
func Run(ctx context.Context, cfg Config) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	started := &atomic.Bool{}
	started.Store(cfg.Startup == nil || cfg.Started)
	var wg sync.WaitGroup
	for kind, p := range map[Kind]*v1.Probe{Startup: cfg.Startup, Liveness: cfg.Liveness, Readiness: cfg.Readiness} {
		if p == nil {
			continue
		}
		l := &loop{cfg: &cfg, kind: kind, spec: p, started: started, stopAll: cancel,
			log: cfg.Logger.With("probe", string(kind))}
		if kind == Readiness && cfg.Ready {
			l.reported, l.passed = Success, true
		}
		wg.Go(func() { l.run(ctx) })
	}
	wg.Wait()
}

// loop is one probe of one container instance.
type loop struct {
	cfg     *Config
	kind    Kind
	spec    *v1.Probe
	started *atomic.Bool
	stopAll context.CancelFunc
	log     *slog.Logger

	last       Result // of the last probe
	streak     int    // probes in a row with that result
	reported   Result // what Report last said; Unknown before the first
	passed     bool   // reported Success once
	loggedAt   time.Time
	suppressed int  // failures not logged since loggedAt
	erring     bool // the last probe could not be made
}

func seconds(s, def int32) time.Duration {
	if s <= 0 {
		s = def
	}
	return time.Duration(s) * time.Second
}

func (l *loop) run(ctx context.Context) {
	period := seconds(l.spec.PeriodSeconds, 10)
	if l.cfg.Jitter {
		t := time.NewTimer(rand.N(period))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	tick := time.NewTicker(period)
	defer tick.Stop()
	soon := time.NewTimer(0)
	soon.Stop()
	retry := firstRetry
	for l.once(ctx) {
		// A readiness probe that has never passed is tried again soon, not a
		// period later: a server that was not listening yet at the first try
		// is Ready milliseconds after it is, not up to periodSeconds after.
		// Those tries count for nothing else (the container is not ready
		// either way).
		var soonC <-chan time.Time
		if l.kind == Readiness && !l.passed && retry < period {
			soon.Reset(retry)
			soonC = soon.C
			retry *= 2
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-soonC:
		}
		soon.Stop()
	}
}

// firstRetry is the first of the doubling delays between the tries of a
// readiness probe that has not passed yet.
const firstRetry = 50 * time.Millisecond

// once probes if it is time to, and returns whether to go on.
func (l *loop) once(ctx context.Context) bool {
	if time.Since(l.cfg.StartedAt) < time.Duration(l.spec.InitialDelaySeconds)*time.Second {
		return true
	}
	switch {
	case l.kind == Startup && l.started.Load():
		return false
	case l.kind != Startup && !l.started.Load():
		return true
	}
	begin := time.Now()
	var r Result
	var out string
	var err error
	// A probe that could not be made (a named port the container does not
	// have, an exec the runtime could not run: the container gone, the
	// exec server lost as the daemon is killed) is tried again at once,
	// maxRetries times in all, and then thrown away, as the kubelet's
	// prober does (runProbeWithRetries, then worker.doProbe's "Prober
	// error, throw away the result"): it counts for neither threshold, so
	// it neither clears a ready container's readiness nor restarts one.
	for range maxRetries {
		if r, out, err = Do(ctx, l.spec, l.cfg.Target); err == nil || ctx.Err() != nil {
			break
		}
	}
	took := time.Since(begin)
	if ctx.Err() != nil {
		return false
	}
	if err != nil {
		l.logError(r, err)
		return true
	}
	l.erring = false
	if l.cfg.Observe != nil {
		l.cfg.Observe(l.kind, r)
	}
	if r == l.last {
		l.streak++
	} else {
		l.last, l.streak = r, 1
	}
	if r == Failure {
		l.logFailure(out, took)
	}
	if (r == Failure && l.streak < int(max(l.spec.FailureThreshold, 1))) ||
		(r == Success && l.streak < int(max(l.spec.SuccessThreshold, 1))) {
		return true
	}
	if r != l.reported {
		l.reported = r
		l.passed = l.passed || r == Success
		level := slog.LevelInfo
		if r == Failure {
			level = slog.LevelWarn
		}
		l.log.Log(ctx, level, "probe result changed", "result", r.String(), "duration", took, "output", out)
		l.cfg.Report(Update{ContainerID: l.cfg.ContainerID, Kind: l.kind, Result: r, Output: out, At: time.Now()})
	}
	switch {
	case l.kind == Startup && r == Success:
		l.started.Store(true)
		return false
	case (l.kind == Startup || l.kind == Liveness) && r == Failure:
		// The container is to be restarted: nothing more to probe in it.
		l.stopAll()
		return false
	}
	return true
}

// maxRetries is how many times a probe that could not be made is tried
// before it is thrown away: the kubelet's maxProbeRetries.
const maxRetries = 3

// logError logs a probe that could not be made, at most once a
// failureLogEvery (the error may quote the container: it is cut as any
// output is), and calls Errored when the probe starts to err.
func (l *loop) logError(r Result, err error) {
	msg := podspec.Truncate(err.Error(), maxOutput)
	if !l.erring {
		l.erring = true
		if l.cfg.Errored != nil {
			l.cfg.Errored(l.kind, r, errors.New(msg))
		}
	}
	now := time.Now()
	if !l.loggedAt.IsZero() && now.Sub(l.loggedAt) < failureLogEvery {
		l.suppressed++
		return
	}
	l.log.Info("probe errored; its result is thrown away", "err", msg, "not_logged", l.suppressed)
	l.loggedAt, l.suppressed = now, 0
}

// logFailure logs a failed probe below its threshold at most once a
// failureLogEvery, saying how many were not logged.
func (l *loop) logFailure(out string, took time.Duration) {
	now := time.Now()
	if !l.loggedAt.IsZero() && now.Sub(l.loggedAt) < failureLogEvery {
		l.suppressed++
		return
	}
	l.log.Info("probe failed", "failures_in_a_row", l.streak, "threshold", max(l.spec.FailureThreshold, 1),
		"duration", took, "output", out, "not_logged", l.suppressed)
	l.loggedAt, l.suppressed = now, 0
}
