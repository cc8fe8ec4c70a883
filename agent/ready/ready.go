// Package ready is --ready-when: when the daemon tells systemd READY=1 beyond
// its first sync (the chosen pods running, or ready), and the gate that holds
// READY=1 back until then, saying in STATUS= what it waits for.
package ready

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/health"
	"github.com/staticpodd/staticpodd/agent/prober"
	"github.com/staticpodd/staticpodd/agent/status"
)

// When is --ready-when: what READY=1 waits for beyond the first sync.
type When struct {
	cond  string   // Synced, PodsRunning or PodsReady
	names []string // chosen pods ([namespace/]name); none: every pod
}

// The conditions of --ready-when.
const (
	Synced      = "synced"
	PodsRunning = "pods-running"
	PodsReady   = "pods-ready"
)

// Parse reads synced, pods-running or pods-ready, the latter two
// optionally with :name,name,... A name is a pod's name as `staticpodd ps`
// shows it or as its manifest gives it (without the node's suffix), with
// namespace/ in front to choose one namespace.
func Parse(s string) (When, error) {
	cond, list, hasList := strings.Cut(s, ":")
	switch cond {
	case "", Synced:
		if hasList {
			return When{}, fmt.Errorf("--ready-when %q: synced takes no pod names", s)
		}
		return When{cond: Synced}, nil
	case PodsRunning, PodsReady:
	default:
		return When{}, fmt.Errorf("--ready-when %q: want synced, pods-running[:NAME,...] or pods-ready[:NAME,...]", s)
	}
	w := When{cond: cond}
	if hasList {
		for n := range strings.SplitSeq(list, ",") {
			n = strings.TrimSpace(n)
			if n == "" || strings.Count(n, "/") > 1 {
				return When{}, fmt.Errorf("--ready-when %q: pod name %q is not [namespace/]name", s, n)
			}
			w.names = append(w.names, n)
		}
	}
	return w, nil
}

// Gated reports whether READY=1 waits for pods.
func (w When) Gated() bool { return w.cond == PodsRunning || w.cond == PodsReady }

// check reports whether pods meet w and, when not, what is waited for, and
// whether that is still progressing: every chosen pod that is not there yet
// is being created (its image imported, its containers started) or has a
// readiness probe that has not answered yet. Only then is systemd's start
// timeout extended; a pod that is missing, failed, or whose probe fails lets
// TimeoutStartSec end the start.
func (w When) check(pods []v1.Pod, probes []prober.Status, node string) (ok bool, waiting string, progressing bool) {
	var chosen []v1.Pod
	var missing []string
	if len(w.names) == 0 {
		chosen = pods
	} else {
		for _, n := range w.names {
			found := false
			for _, p := range pods {
				if matchPod(n, p, node) {
					chosen = append(chosen, p)
					found = true
				}
			}
			if !found {
				missing = append(missing, n)
			}
		}
	}
	var wait []string
	progressing = true
	for _, n := range missing {
		wait = append(wait, "pod "+n+" (no such pod yet)")
		progressing = false
	}
	for _, p := range chosen {
		if p.DeletionTimestamp != nil {
			continue
		}
		if w.meets(p) {
			continue
		}
		why, failed := notYet(p, w.cond, probes)
		wait = append(wait, fmt.Sprintf("pod %s (%s)", p.Name, why))
		if failed {
			progressing = false
		}
	}
	if len(wait) == 0 {
		return true, "", false
	}
	return false, "waiting for " + w.cond + ": " + strings.Join(wait, ", "), progressing
}

func (w When) meets(p v1.Pod) bool {
	c := status.Classify(&p)
	if w.cond == PodsRunning {
		// Running as `staticpodd ps` shows it: the phase, and every
		// container up (a crash-looping one keeps the phase Running).
		return c.Phase == v1.PodSucceeded || (c.Phase == v1.PodRunning && c.Up)
	}
	return c.Ready
}

// matchPod: n is p's name, or p's manifest name (p's name less -<node>),
// each with an optional namespace/ in front.
func matchPod(n string, p v1.Pod, node string) bool {
	if ns, name, ok := strings.Cut(n, "/"); ok {
		if ns != p.Namespace {
			return false
		}
		n = name
	}
	return n == p.Name || n+"-"+node == p.Name
}

// notYet says why p is not there yet, and whether it failed: a container
// waits for a reason that does not pass, has restarted, its readiness probe
// fails, or its pod ended.
func notYet(p v1.Pod, cond string, probes []prober.Status) (why string, failed bool) {
	c := status.Classify(&p)
	if c.Phase == v1.PodFailed {
		return "Failed", true
	}
	for _, cs := range c.Containers {
		switch {
		case cs.Waiting != "":
			return "container " + cs.Name + " " + cs.Waiting, cs.Hopeless || cs.Restarts > 0
		case cs.Restarts > 0:
			return fmt.Sprintf("container %s restarted %d times", cs.Name, cs.Restarts), true
		case cond == PodsReady && !cs.Ready && cs.Running:
			for _, pr := range probes {
				if pr.Namespace == p.Namespace && pr.Pod == p.Name && pr.Container == cs.Name &&
					pr.Probe == prober.Readiness && pr.Result == prober.Failure.String() {
					return "container " + cs.Name + " readiness probe " + pr.Result, true
				}
			}
			return "container " + cs.Name + " not ready", false
		}
	}
	return string(c.Phase), false
}

// Notifier is systemd's, as the gate speaks to it.
type Notifier interface {
	// SendReady says READY=1.
	SendReady()
	// ExtendTimeout asks systemd to wait d more for READY=1.
	ExtendTimeout(d time.Duration)
}

// Pods are the agent's pods as the gate reads them.
type Pods interface {
	// Changed is closed at the next change of a pod.
	Changed() <-chan struct{}
	Pods() []v1.Pod
	Probes() []prober.Status
}

// Gate holds READY=1 back until the pods meet When, saying in STATUS=
// what it waits for, and extends systemd's start timeout while what it
// waits for is progressing. A pod that has failed stops the extensions, so
// TimeoutStartSec ends the start with the STATUS= naming it.
type Gate struct {
	When     When
	Node     string
	Pods     Pods
	Notifier Notifier
	Status   *health.Line
	Extend   time.Duration   // each EXTEND_TIMEOUT_USEC's length
	Synced   <-chan struct{} // closed by the agent's first sync

	cancel context.CancelFunc
	done   chan struct{}
}

// Start starts waiting, from the agent's first sync, until the pods meet
// the gate, then says READY=1.
func (g *Gate) Start(ctx context.Context) error {
	ctx, g.cancel = context.WithCancel(ctx)
	g.done = make(chan struct{})
	go func() {
		defer close(g.done)
		g.run(ctx)
	}()
	return nil
}

// Stop ends the wait, READY=1 said or not.
func (g *Gate) Stop() {
	g.cancel()
	<-g.done
}

// run waits, from the agent's first sync, until the pods meet the gate, then
// says READY=1. It returns early when ctx ends.
func (g *Gate) run(ctx context.Context) {
	select {
	case <-g.Synced:
	case <-ctx.Done():
		return
	}
	tick := time.NewTicker(g.Extend / 2)
	defer tick.Stop()
	last := ""
	for {
		changed := g.Pods.Changed()
		ok, waiting, progressing := g.When.check(g.Pods.Pods(), g.Pods.Probes(), g.Node)
		if ok {
			g.Status.SetGate("")
			g.Notifier.SendReady()
			return
		}
		if waiting != last {
			g.Status.SetGate(waiting)
			last = waiting
		}
		if progressing {
			g.Notifier.ExtendTimeout(g.Extend)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
	}
}
