package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/health"
	"github.com/staticpodd/staticpodd/agent/prober"
	"github.com/staticpodd/staticpodd/agent/status"
)

// readyWhen is --ready-when: what READY=1 waits for beyond the first sync.
type readyWhen struct {
	cond  string   // readySynced, readyRunning or readyReady
	names []string // chosen pods ([namespace/]name); none: every pod
}

const (
	readySynced  = "synced"
	readyRunning = "pods-running"
	readyReady   = "pods-ready"
)

// parseReadyWhen reads synced, pods-running or pods-ready, the latter two
// optionally with :name,name,... A name is a pod's name as `staticpodd ps`
// shows it or as its manifest gives it (without the node's suffix), with
// namespace/ in front to choose one namespace.
func parseReadyWhen(s string) (readyWhen, error) {
	cond, list, hasList := strings.Cut(s, ":")
	switch cond {
	case "", readySynced:
		if hasList {
			return readyWhen{}, fmt.Errorf("--ready-when %q: synced takes no pod names", s)
		}
		return readyWhen{cond: readySynced}, nil
	case readyRunning, readyReady:
	default:
		return readyWhen{}, fmt.Errorf("--ready-when %q: want synced, pods-running[:NAME,...] or pods-ready[:NAME,...]", s)
	}
	w := readyWhen{cond: cond}
	if hasList {
		for n := range strings.SplitSeq(list, ",") {
			n = strings.TrimSpace(n)
			if n == "" || strings.Count(n, "/") > 1 {
				return readyWhen{}, fmt.Errorf("--ready-when %q: pod name %q is not [namespace/]name", s, n)
			}
			w.names = append(w.names, n)
		}
	}
	return w, nil
}

// gated reports whether READY=1 waits for pods.
func (w readyWhen) gated() bool { return w.cond == readyRunning || w.cond == readyReady }

// check reports whether pods meet w and, when not, what is waited for, and
// whether that is still progressing: every chosen pod that is not there yet
// is being created (its image imported, its containers started) or has a
// readiness probe that has not answered yet. Only then is systemd's start
// timeout extended; a pod that is missing, failed, or whose probe fails lets
// TimeoutStartSec end the start.
func (w readyWhen) check(pods []v1.Pod, probes []prober.Status, node string) (ok bool, waiting string, progressing bool) {
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

func (w readyWhen) meets(p v1.Pod) bool {
	c := status.Classify(&p)
	if w.cond == readyRunning {
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
		case cond == readyReady && !cs.Ready && cs.Running:
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

// readyGate holds READY=1 back until the pods meet w, saying in STATUS=
// what it waits for, and extends systemd's start timeout while what it
// waits for is progressing. A pod that has failed stops the extensions, so
// TimeoutStartSec ends the start with the STATUS= naming it.
type readyGate struct {
	when     readyWhen
	node     string
	agent    *agent.Agent
	notifier *readyNotifier
	status   *health.Line
	extend   time.Duration // each EXTEND_TIMEOUT_USEC's length
}

// run waits, from the agent's first sync, until the pods meet the gate, then
// says READY=1. It returns early when ctx ends.
func (g *readyGate) run(ctx context.Context, synced <-chan struct{}) {
	select {
	case <-synced:
	case <-ctx.Done():
		return
	}
	tick := time.NewTicker(g.extend / 2)
	defer tick.Stop()
	last := ""
	for {
		changed := g.agent.Changed()
		ok, waiting, progressing := g.when.check(g.agent.Pods(), g.agent.Probes(), g.node)
		if ok {
			g.status.SetGate("")
			g.notifier.sendReady()
			return
		}
		if waiting != last {
			g.status.SetGate(waiting)
			last = waiting
		}
		if progressing {
			g.notifier.ExtendTimeout(g.extend)
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-tick.C:
		}
	}
}
