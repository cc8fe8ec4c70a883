package agent

import (
	stdcmp "cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/status"
)

// Start order (manifest.AnnotationStartAfter): nothing of a pod is made
// until every pod it starts after is Ready; once made, it keeps running
// whatever becomes of them, as the kubelet keeps a pod whose dependency
// crashed. Pods removed together stop in the reverse order: dependents
// first, and lower priorities first, as the kubelet's graceful node
// shutdown stops pods by priority (shutdownGracePeriodByPodPriority).

// checkOrderLocked reads the start order of the merged pods, for the
// workers, and returns a problem for each pod that cannot start whatever
// happens: in a cycle, or naming a pod no manifest defines.
func (a *Agent) checkOrderLocked(pods map[string]manifest.Pod) []manifest.Problem {
	a.order = manifest.CheckOrder(pods, a.cfg.NodeName)
	a.stopPriority = stopPriorities(pods, a.cfg.NodeName)
	problems := make([]manifest.Problem, 0, len(a.order.Blocked))
	for _, e := range a.order.Blocked {
		problems = append(problems, manifest.Problem{Origin: e.Origin, Err: e})
	}
	slices.SortFunc(problems, func(x, y manifest.Problem) int { return strings.Compare(x.Origin, y.Origin) })
	return problems
}

// startWait says why the pod of key cannot be made yet ("" once it can):
// a pod it starts after is not Ready, or it is blocked for good.
func (a *Agent) startWait(key string) (why string, blocked bool) {
	a.mu.Lock()
	e, after := a.order.Blocked[key], a.order.After[key]
	a.mu.Unlock()
	if e != nil {
		return e.Reason, true
	}
	var waiting []string
	for _, dep := range after {
		if p := a.statuses.Desired(dep); p == nil || p.DeletionTimestamp != nil || !status.Classify(p).Ready {
			waiting = append(waiting, dep[strings.IndexByte(dep, '/')+1:])
		}
	}
	if len(waiting) == 0 {
		return "", false
	}
	return strings.Join(waiting, ", ") + " not Ready", false
}

// waitForDependencies holds back the making of pod while startWait says
// so: its containers wait as WaitingForDependency, with an event once per
// generation. It reports whether the pod must wait.
func (w *worker) waitForDependencies(pod *v1.Pod) bool {
	why, blocked := w.a.startWait(w.key)
	if why == "" {
		for _, ci := range w.gen.ctrs {
			if ci.reason == status.WaitingForDependency {
				ci.reason, ci.message = "", ""
			}
		}
		return false
	}
	for _, c := range manifest.AllContainers(pod) {
		ci := w.info(c.Name)
		ci.reason, ci.message = status.WaitingForDependency, why
	}
	if !w.gen.dependencyWait {
		w.gen.dependencyWait = true
		w.logger.Info("waiting for the pods it starts after", "why", why)
		if blocked {
			w.a.events.Eventf(events.PodRef(pod), v1.EventTypeWarning, events.WaitingForDependency, "Not starting: %s", why)
		} else {
			w.a.events.Eventf(events.PodRef(pod), v1.EventTypeNormal, events.WaitingForDependency, "Waiting to start: %s", why)
		}
	}
	return true
}

// waitsForDependencies: the generation's containers wait for the pods it
// starts after, so nothing of it has been made yet.
func (w *worker) waitsForDependencies() bool {
	for _, ci := range w.gen.ctrs {
		if ci.reason == status.WaitingForDependency {
			return true
		}
	}
	return false
}

// readinessShown nudges the pods that start after the worker's when its
// readiness, as published, changed: one of them may start now.
func (w *worker) readinessShown(p *v1.Pod) {
	ready := p != nil && status.Ready(p)
	if ready == w.shownReady {
		return
	}
	w.shownReady = ready
	w.a.mu.Lock()
	defer w.a.mu.Unlock()
	for _, d := range w.a.order.Dependents[w.key] {
		if dw := w.a.workers[d]; dw != nil {
			dw.nudge()
		}
	}
}

// stopping is a pod no longer desired whose worker still stops it, with
// what orders its stop among the others stopping.
type stopping struct {
	pod  *v1.Pod // the last desired generation
	rank stopRank
	// until is how long its worker waits for its turn at most, set when
	// it first waits (stopWait); done: it took its turn.
	until time.Time
	done  bool
	// gather is when it stops waiting for the pods that start after it,
	// still desired, to be removed too (gatherWindow).
	gather time.Time
}

// stopRank orders stops: a pod stops after every pod stopping at the same
// time with a lower rank. priority is the highest of its own and of those
// of the pods that start after it, height the length of the longest chain
// of such pods: a pod outranks every pod that starts after it.
type stopRank struct {
	priority int32
	height   int
}

func (r stopRank) compare(o stopRank) int {
	return stdcmp.Or(stdcmp.Compare(r.priority, o.priority), stdcmp.Compare(r.height, o.height))
}

// Priorities of the well-known classes (scheduling.SystemCriticalPriority),
// for a static pod that names one without spec.priority, which only the
// API server's admission would fill in.
const (
	systemClusterCritical = 2000000000
	systemNodeCritical    = systemClusterCritical + 1000
)

// podPriority is pod's priority as the kubelet's shutdown manager reads it,
// its class's when only priorityClassName is given.
func podPriority(pod *v1.Pod) int32 {
	switch {
	case pod.Spec.Priority != nil:
		return *pod.Spec.Priority
	case pod.Spec.PriorityClassName == "system-node-critical":
		return systemNodeCritical
	case pod.Spec.PriorityClassName == "system-cluster-critical":
		return systemClusterCritical
	}
	return 0
}

// trackStopsLocked records, before the workers of pods no longer desired
// are told so, the pod each stops, and ranks every pod stopping; a pod
// desired again is no longer stopping.
func (a *Agent) trackStopsLocked(pods map[string]manifest.Pod) {
	added := false
	for key, w := range a.workers {
		_, desired := pods[key]
		switch {
		case desired:
			delete(a.stopping, key)
		case a.stopping[key] == nil:
			if p := w.wanted(); p != nil {
				if a.stopping == nil {
					a.stopping = map[string]*stopping{}
				}
				a.stopping[key] = &stopping{pod: p}
				added = true
			}
		}
	}
	if added {
		rankStops(a.stopping, a.cfg.NodeName)
		// A pod that waited for its dependents to be removed too takes
		// its turn among them now.
		for key := range a.stopping {
			if w := a.workers[key]; w != nil {
				w.nudge()
			}
		}
	}
}

// rankStops sets the rank of each pod in s (stopRank).
func rankStops(s map[string]*stopping, node string) {
	dependents := map[string][]string{}
	for key, st := range s {
		for _, name := range manifest.StartAfter(st.pod) {
			if dep := st.pod.Namespace + "/" + name + "-" + node; s[dep] != nil && dep != key {
				dependents[dep] = append(dependents[dep], key)
			}
		}
	}
	const (
		unseen = iota
		visiting
		ranked
	)
	state := map[string]int{}
	// A pod's rank takes each dependent's once that one is ranked:
	// depth first, without recursion (10,000 pods in a chain cost no
	// stack). A cycle (pods that never started, or started before their
	// annotations made one) is cut where it closes.
	takeRank := func(parent, child string) {
		r, c := &s[parent].rank, s[child].rank
		r.priority = max(r.priority, c.priority)
		r.height = max(r.height, c.height+1)
	}
	type frame struct {
		key string
		i   int // the next dependent to look at
	}
	for root := range s {
		if state[root] != unseen {
			continue
		}
		calls := []frame{{key: root}}
		state[root] = visiting
		s[root].rank = stopRank{priority: podPriority(s[root].pod)}
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			if f.i < len(dependents[f.key]) {
				d := dependents[f.key][f.i]
				f.i++
				switch state[d] {
				case unseen:
					state[d] = visiting
					s[d].rank = stopRank{priority: podPriority(s[d].pod)}
					calls = append(calls, frame{key: d})
				case ranked:
					takeRank(f.key, d)
				}
				continue
			}
			calls = calls[:len(calls)-1]
			state[f.key] = ranked
			if len(calls) > 0 {
				takeRank(calls[len(calls)-1].key, f.key)
			}
		}
	}
}

// gatherWindow is how long a pod removed while pods that start after it
// are still desired waits for them to be removed too: a directory emptied
// by rm is one unlink after the other, each its own update. Those removed
// within it stop first; if they are not, it stops.
const gatherWindow = time.Second

// stopSlack is what a pod's stop takes beyond its grace period at most:
// the kill after it, the removal of its containers and sandbox.
const stopSlack = 10 * time.Second

// stopTurn is when the worker of key, whose pod is no longer desired, may
// stop it: zero at once, when no pod stopping beside it ranks lower; else
// it waits for them to be gone (they nudge it as they go:
// forgetStopLocked), at most stopWait, and then stops all the same.
func (w *worker) stopTurn() time.Time {
	a := w.a
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.stopping[w.key]
	if st == nil || st.done {
		return time.Time{}
	}
	now := time.Now()
	if st.until.IsZero() && a.dependentsDesiredLocked(st.pod) {
		if st.gather.IsZero() {
			st.gather = now.Add(gatherWindow)
		}
		if now.Before(st.gather) {
			return st.gather
		}
	}
	var first []*stopping
	var names []string
	for key, o := range a.stopping {
		if key != w.key && a.workers[key] != nil && o.rank.compare(st.rank) < 0 {
			first = append(first, o)
			names = append(names, key[strings.IndexByte(key, '/')+1:])
		}
	}
	slices.Sort(names)
	if st.until.IsZero() {
		st.until = now.Add(stopWait(first))
		if len(first) > 0 {
			w.logger.Info("stopping after the pods that start after it or rank lower", "first", names)
			a.events.Eventf(events.PodRef(st.pod), v1.EventTypeNormal, events.StoppingAfterDependents,
				"Stopping after %s", shortList(names))
		}
	}
	if len(first) == 0 || !now.Before(st.until) {
		if len(first) > 0 {
			w.logger.Warn("stopping before pods that should stop first: they took longer than their grace periods", "first", names)
		}
		st.done = true
		return time.Time{}
	}
	return st.until
}

// dependentsDesiredLocked reports whether a pod still desired starts after
// pod.
func (a *Agent) dependentsDesiredLocked(pod *v1.Pod) bool {
	name := strings.TrimSuffix(pod.Name, "-"+a.cfg.NodeName)
	for _, w := range a.workers {
		if p := w.wanted(); p != nil && p.Namespace == pod.Namespace && slices.Contains(manifest.StartAfter(p), name) {
			return true
		}
	}
	return false
}

// stopWait is how long a pod waits for the pods that stop before it: each
// rank among them stops in turn, within the longest grace period of them
// and stopSlack, as the kubelet's shutdown manager gives each priority
// group its own grace period, one group after the other.
func stopWait(first []*stopping) time.Duration {
	ranks := map[stopRank]bool{}
	var longest time.Duration
	for _, o := range first {
		ranks[o.rank] = true
		longest = max(longest, podGrace(o.pod))
	}
	return time.Duration(len(ranks)) * (longest + stopSlack)
}

// forgetStopLocked forgets the worker of key, gone: the pods that waited
// for it may take their turn.
func (a *Agent) forgetStopLocked(key string) {
	if _, ok := a.stopping[key]; !ok {
		return
	}
	delete(a.stopping, key)
	for k := range a.stopping {
		if w := a.workers[k]; w != nil {
			w.nudge()
		}
	}
}

// shortList joins names for an event, at most 8 of them.
func shortList(names []string) string {
	const most = 8
	if len(names) > most {
		return fmt.Sprintf("%s and %d more", strings.Join(names[:most], ", "), len(names)-most)
	}
	return strings.Join(names, ", ")
}

// maxStopOrdered bounds the containers one container is ordered against
// (podspec.Container.StopBefore, StopAfter): a pod many pods start after
// must not make a start carry thousands of unit names to systemd.
const maxStopOrdered = 128

// stopPriorities is the priority each desired pod stops by (its stopRank's):
// the highest of its own and of the pods that start after it, so that
// ordering by priority never contradicts the start order.
func stopPriorities(pods map[string]manifest.Pod, node string) map[string]int32 {
	s := make(map[string]*stopping, len(pods))
	for key, p := range pods {
		s[key] = &stopping{pod: p.Pod}
	}
	rankStops(s, node)
	out := make(map[string]int32, len(s))
	for key, st := range s {
		out[key] = st.rank.priority
	}
	return out
}

// orderStops fills in, for the runtime, the running containers of the
// pods the worker's pod starts after and of those that start after it, then
// of the pods of a higher and of a lower stop priority (stopPriorities):
// whoever stops them all without the agent (systemd at power-off) then
// stops the dependents first and the lower priorities first, as the agent
// does and as the kubelet's graceful node shutdown orders pods by priority.
// The start order comes first and the nearest priorities next, so that
// the bound (maxStopOrdered) drops what the transitivity of the order
// between the others carries anyway.
func (w *worker) orderStops(c *podspec.Container) {
	w.a.mu.Lock()
	after, dependents := w.a.order.After[w.key], w.a.order.Dependents[w.key]
	higher, lower := byStopPriority(w.a.stopPriority, w.key)
	w.a.mu.Unlock()
	c.StopBefore = w.a.runningContainers(slices.Concat(after, higher))
	c.StopAfter = w.a.runningContainers(slices.Concat(dependents, lower))
}

// byStopPriority are the pods of prio whose stop priority is higher than
// that of key, lowest first, and those whose is lower, highest first.
func byStopPriority(prio map[string]int32, key string) (higher, lower []string) {
	own, ok := prio[key]
	if !ok {
		return nil, nil
	}
	for k, p := range prio {
		switch {
		case p > own:
			higher = append(higher, k)
		case p < own:
			lower = append(lower, k)
		}
	}
	nearest := func(sign int) func(x, y string) int {
		return func(x, y string) int {
			return stdcmp.Or(sign*stdcmp.Compare(prio[x], prio[y]), strings.Compare(x, y))
		}
	}
	slices.SortFunc(higher, nearest(1))
	slices.SortFunc(lower, nearest(-1))
	return higher, lower
}

// runningContainers are the IDs of the running containers of the desired
// pods of keys, as last published, each once, at most maxStopOrdered.
func (a *Agent) runningContainers(keys []string) []string {
	var ids []string
	seen := map[string]bool{}
	for _, key := range keys {
		if len(ids) == maxStopOrdered {
			break
		}
		p := a.statuses.Desired(key)
		if p == nil || seen[key] {
			continue
		}
		seen[key] = true
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
			if cs.State.Running != nil && cs.ContainerID != "" && len(ids) < maxStopOrdered {
				ids = append(ids, strings.TrimPrefix(cs.ContainerID, containerIDPrefix))
			}
		}
	}
	return ids
}
