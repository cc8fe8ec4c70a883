package agent

import (
	"fmt"
	"maps"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/prober"
	"github.com/staticpodd/staticpodd/agent/status"
)

// defaultGrace stops containers of a pod whose manifest is unknown (adopted
// leftovers), the kubelet's default terminationGracePeriodSeconds.
const defaultGrace = 30 * time.Second

type actionKind int

const (
	actKill     actionKind = iota // stop a running container: SIGTERM, grace, SIGKILL
	actDestroy                    // remove an exited container
	actTeardown                   // remove the sandbox and volumes of a pod no longer desired
	actSandbox                    // create the sandbox and volumes of the desired pod
	actStart                      // start one container of the desired pod
)

func (k actionKind) String() string {
	return [...]string{"kill", "destroy", "teardown", "sandbox", "start"}[k]
}

// action is one step to bring actual towards desired. Steps run in order; a failed
// step stops the rest, so a new generation never starts beside an old one.
type action struct {
	kind      actionKind
	podUID    string
	container string        // container name (kill, destroy, start)
	id        string        // runtime container ID (kill, destroy)
	grace     time.Duration // kill
	reason    string        // kill: why, when not because the pod goes
	// group: consecutive kills of one group run side by side; the next
	// group starts when they are all done (regular containers, then each
	// sidecar in reverse order).
	group int
	// remaining: the kill gets what is left of grace since the pod's first
	// kill, not grace afresh (a sidecar stopped after the others).
	remaining bool
	// restartAll: the kill or removal restarts all the pod's containers in
	// place (planRestartAll): a kill runs no preStop hook, a removal is
	// remembered for the container's next start and its status.
	restartAll bool
	attempt    int    // start
	prevID     string // start: the exited container this one replaces
}

// desiredPod is the pod to run with the hash of each container's resolved spec,
// in the state its worker recorded for it, and what this sync was asked. A
// container without a hash could not be resolved and is not started.
type desiredPod struct {
	pod    *v1.Pod
	hashes map[string]string
	// state is where the generation is in its life, as the worker recorded
	// it (generation.state): plan plans that state, it does not move it.
	state podWorkState
	// stop is why and how the pod was told to stop; set unless syncing.
	stop *stopRequest
	// final are the last instances of the pod's exited containers, by name,
	// that the generation remembers: one reclaim removed counts as exited,
	// so nothing starts it again.
	final map[string]podspec.ContainerStatus
	// reclaim is this sync's request from node-level reclaim: a pod that
	// will not run its exited containers again removes them (their
	// writable layers), planned once, by planReclaim.
	reclaim bool
	// released: an eviction or the CRI's stop holds the pod now; a pod
	// terminated for another reason (its active deadline) gives back what
	// it holds as an evicted one does.
	released bool
	// firstAttempt is the attempt a container with no instance left
	// starts as (generation.firstAttempt); 0 when absent.
	firstAttempt map[string]int
}

// stopRequest is why a pod is stopped and kept stopped, as the kubelet's pod
// workers take a kill with a reason and a grace period override
// (UpdatePodOptions.KillPodOptions): its active deadline passed
// (reasonDeadlineExceeded, for good) or it was evicted (reasonEvicted, until
// the eviction is lifted).
type stopRequest struct {
	reason, message string
	// grace overrides the pod's terminationGracePeriodSeconds when > 0.
	grace time.Duration
}

// evicted: the pod was stopped by the eviction manager, or through the CRI
// (StopPod). Once its containers have stopped it gives back what it holds,
// as the kubelet's terminated pod does (syncTerminatedPod): its containers,
// then its sandbox, volumes (a memory-backed emptyDir is memory) and logs;
// when the eviction or hold is lifted it starts afresh as a new generation.
// A pod past its deadline is stopped for good and keeps its exited
// containers for its status.
func (r *stopRequest) evicted() bool {
	return r.reason == reasonEvicted || r.reason == reasonStoppedByRuntime
}

// reasonRecreated stops a pod whose manifest was removed and written again,
// to start it again: no reason the pod's status shows.
const reasonRecreated = "Recreated"

// podState is what the runtime has for one pod UID, as a worker knows it.
type podState struct {
	uid     string
	sandbox bool
	// unprepared: a sandbox found at the daemon's start with no container
	// in it, whose volumes may never have been prepared (their preparation
	// failed, a missing Secret, or the daemon died before it): the next
	// start prepares them first, as for a sandbox made now.
	unprepared bool
	// network is the sandbox's place on the pod network, once known.
	network    *podspec.SandboxStatus
	grace      time.Duration // to stop its containers when it is no longer desired
	containers []podspec.ContainerStatus
	// unhealthy are the containers, by ID, whose liveness or startup probe
	// failed: to be killed, and restarted unless the restartPolicy is Never.
	unhealthy map[string]prober.Kind
	// unstarted are the running containers, by ID, whose startup probe has
	// not passed yet: a sidecar among them holds back the containers after it.
	unstarted map[string]bool
	// sidecars are the names of the pod's sidecars in spec order, when the
	// worker knows its spec: they are stopped after the other containers,
	// last first.
	sidecars []string
	// postStarting: a postStart hook of the pod runs. No container is
	// started meanwhile, as the kubelet's pod worker waits for the hook.
	postStarting bool
	// hookFailed are the containers, by ID, whose postStart hook failed:
	// killed, then restarted per restartPolicy.
	hookFailed map[string]bool
	// ended are the containers, by ID, of a run that ended for good (an
	// eviction, since lifted: the worker marks them when it lifts it).
	// They are removed before the pod starts afresh, and do not count as
	// its earlier instances.
	ended map[string]bool
}

// The plan reads a pod's containers as its status does: which are sidecars,
// which restart, which instance is the current one.
var (
	isSidecar         = status.IsSidecar
	shouldRestart     = status.ContainerShouldRestart
	restartsAfterKill = status.RestartsAfterKill
	latestByName      = status.LatestByName
)

// stopContainers stops the running containers of st the kubelet's way: the
// others side by side, then the sidecars one by one, last first, with what
// is left of grace.
func stopContainers(st *podState, cs []podspec.ContainerStatus, grace time.Duration) []action {
	var acts []action
	sidecar := map[string]int{}
	for i, n := range st.sidecars {
		sidecar[n] = i + 1
	}
	for _, c := range cs {
		if c.State != podspec.StateExited && sidecar[c.Name] == 0 {
			acts = append(acts, action{kind: actKill, podUID: st.uid, container: c.Name, id: c.ID, grace: grace})
		}
	}
	for i := len(st.sidecars) - 1; i >= 0; i-- {
		for _, c := range cs {
			if c.State != podspec.StateExited && c.Name == st.sidecars[i] {
				acts = append(acts, action{kind: actKill, podUID: st.uid, container: c.Name, id: c.ID, grace: grace,
					group: len(st.sidecars) - i, remaining: true})
			}
		}
	}
	return acts
}

// plan returns the steps that take actual (every pod UID a worker handles) to
// desired (nil: nothing). Pods of other UIDs are stopped and removed first.
func plan(desired *desiredPod, actual map[string]*podState) []action {
	var acts []action
	uids := make([]string, 0, len(actual))
	for uid := range actual {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	for _, uid := range uids {
		if desired != nil && uid == string(desired.pod.UID) {
			continue
		}
		acts = append(acts, removePod(actual[uid])...)
	}
	if desired == nil {
		return acts
	}
	return append(acts, runPod(desired, actual[string(desired.pod.UID)])...)
}

// removePod stops every container of st, removes them, then the sandbox. An
// adopted pod's grace period is the longest its containers were started with.
func removePod(st *podState) []action {
	grace := st.grace
	if grace == 0 {
		grace = adoptedGrace(st.containers)
	}
	acts := stopContainers(st, st.containers, grace)
	for _, c := range st.containers {
		acts = append(acts, action{kind: actDestroy, podUID: st.uid, container: c.Name, id: c.ID})
	}
	return append(acts, action{kind: actTeardown, podUID: st.uid})
}

// adoptedGrace is the longest grace period the containers of a pod whose
// manifest is unknown were started with; defaultGrace if none knows its own.
func adoptedGrace(cs []podspec.ContainerStatus) time.Duration {
	var g time.Duration
	for _, c := range cs {
		g = max(g, c.TerminationGracePeriod)
	}
	if g == 0 {
		return defaultGrace
	}
	return max(g, manifest.MinimumGracePeriod)
}

// podWorkState is where the desired generation of a worker is in its life,
// as the kubelet's PodWorkerState: it syncs until it is told to stop
// (evicted, past its active deadline), terminates while its containers stop,
// and is terminated once none runs (desiredPod.stopped). The worker records
// it (generation); plan reads it. Older generations are not in it: a worker
// stops and removes them before anything of the desired one runs.
type podWorkState int

const (
	// podSyncing: the pod runs per its spec and restartPolicy (SyncPod).
	podSyncing podWorkState = iota
	// podTerminating: the pod was told to stop; its containers are
	// stopped and none is started (TerminatingPod).
	podTerminating
	// podTerminated: nothing of the pod runs. An evicted pod gives back what
	// it holds; one past its deadline keeps its exited containers for its
	// status until node-level reclaim takes them (TerminatedPod).
	podTerminated
)

func (s podWorkState) String() string {
	return [...]string{"syncing", "terminating", "terminated"}[s]
}

// podView is what plan sees of the desired pod's containers: the kept ones
// (those of an ended run left out) and the newest instance of each name.
type podView struct {
	st *podState
	// latest is the newest instance of each name, with the final status of
	// one reclaim removed.
	latest map[string]podspec.ContainerStatus
}

// real reports whether the runtime has the container of ID id (kept).
func (v podView) real(id string) bool {
	for i := range v.st.containers {
		if v.st.containers[i].ID == id {
			return true
		}
	}
	return false
}

// view is d's look at st (nil: the pod has nothing yet).
func (d *desiredPod) view(st *podState) podView {
	if st == nil {
		st = &podState{uid: string(d.pod.UID)}
	}
	if len(st.ended) > 0 {
		kept := make([]podspec.ContainerStatus, 0, len(st.containers))
		for _, c := range st.containers {
			if !st.ended[c.ID] {
				kept = append(kept, c)
			}
		}
		cp := *st
		cp.containers = kept
		st = &cp
	}
	v := podView{st: st, latest: latestByName(st.containers)}
	for name, c := range d.final {
		if _, ok := v.latest[name]; !ok {
			v.latest[name] = c // removed by reclaim once it had finished
		}
	}
	return v
}

// stopped reports whether nothing of the pod runs, given what the worker has
// of it (st, nil: nothing): no newest instance of a container is running or
// made, those of an ended run left out. It is the one rule by which the
// worker moves a terminating generation to terminated.
func (d *desiredPod) stopped(st *podState) bool {
	for _, c := range d.view(st).latest {
		if c.State != podspec.StateExited {
			return false
		}
	}
	return true
}

// runPod plans the desired pod in the state the worker recorded, after
// removing what is left of an ended run and stray containers; then what
// node-level reclaim asks, if it does.
func runPod(d *desiredPod, st *podState) []action {
	held := st != nil
	if st == nil {
		st = &podState{uid: string(d.pod.UID)}
	}
	v := d.view(st)
	acts := removeStrays(d, st, v)
	switch d.state {
	case podTerminating:
		acts = append(acts, planTerminating(d, v)...)
	case podTerminated:
		acts = planTerminated(d, v, held, acts)
	default:
		acts = planSyncing(d, v, acts)
	}
	return append(acts, planReclaim(d, v, acts)...)
}

// removeStrays stops and removes the containers of a run that ended for good
// (they go first: the pod starts afresh without them), containers of no
// spec, and older instances of a name.
func removeStrays(d *desiredPod, st *podState, v podView) []action {
	uid, grace := string(d.pod.UID), podGrace(d.pod)
	remove := func(c podspec.ContainerStatus) []action {
		var acts []action
		if c.State != podspec.StateExited {
			acts = append(acts, action{kind: actKill, podUID: uid, container: c.Name, id: c.ID, grace: grace})
		}
		return append(acts, action{kind: actDestroy, podUID: uid, container: c.Name, id: c.ID})
	}
	var acts []action
	if st != nil && len(st.ended) > 0 {
		for _, c := range st.containers {
			if st.ended[c.ID] {
				acts = append(acts, remove(c)...)
			}
		}
	}
	known := map[string]bool{}
	for _, c := range manifest.AllContainers(d.pod) {
		known[c.Name] = true
	}
	for _, c := range v.st.containers {
		if !known[c.Name] || v.latest[c.Name].ID != c.ID {
			acts = append(acts, remove(c)...)
		}
	}
	return acts
}

// stopGrace is the grace period of a stopped pod's containers: the stop's
// override, else the pod's.
func stopGrace(d *desiredPod) time.Duration {
	if d.stop.grace > 0 {
		return max(d.stop.grace, manifest.MinimumGracePeriod)
	}
	return podGrace(d.pod)
}

// planTerminating stops every container that runs, nothing starts (the
// kubelet's terminal phase), what exited stays for its status.
func planTerminating(d *desiredPod, v podView) []action {
	return stopContainers(v.st, v.newest(), stopGrace(d))
}

// planTerminated: nothing of the pod runs. An evicted pod gives back what
// it holds, as the kubelet's syncTerminatedPod, once its strays are gone:
// its containers, then its sandbox, volumes (a memory-backed emptyDir is
// memory) and logs; held: the worker has a state for it. So does one an
// eviction or the CRI's stop holds after it terminated for another reason
// (released). Any other keeps its exited containers, for reclaim.
func planTerminated(d *desiredPod, v podView, held bool, strays []action) []action {
	if !d.stop.evicted() && !d.released {
		return strays
	}
	if len(strays) > 0 {
		return strays
	}
	uid := string(d.pod.UID)
	var acts []action
	for _, c := range v.st.containers {
		acts = append(acts, action{kind: actDestroy, podUID: uid, container: c.Name, id: c.ID})
	}
	// Whatever the worker holds of it (a state: a sandbox, containers, or
	// a sandbox it could not finish, its DNS or its volumes): the teardown
	// lets the UID go.
	if held {
		acts = append(acts, action{kind: actTeardown, podUID: uid})
	}
	return acts
}

// newest is the newest instance of each name, by name.
func (v podView) newest() []podspec.ContainerStatus {
	names := slices.Sorted(maps.Keys(v.latest))
	out := make([]podspec.ContainerStatus, 0, len(names))
	for _, n := range names {
		out = append(out, v.latest[n])
	}
	return out
}

// planReclaim removes, when node-level reclaim asks, the exited containers
// (their writable layers) of a pod that will not run them again: one past its
// deadline, stopping or stopped, or one finished for good with nothing left
// to do, after the steps planned for its state. An evicted pod gives them
// back anyway, and one that runs may start them again.
func planReclaim(d *desiredPod, v podView, planned []action) []action {
	if !d.reclaim || len(planned) > 0 && d.state == podSyncing || !reclaimsFinished(d, v) {
		return nil
	}
	var acts []action
	for _, c := range v.newest() {
		if c.State == podspec.StateExited && v.real(c.ID) {
			acts = append(acts, action{kind: actDestroy, podUID: string(d.pod.UID), container: c.Name, id: c.ID})
		}
	}
	return acts
}

// reclaimsFinished reports whether node-level reclaim may remove the exited
// containers of d, as a pod done with them: stopping or stopped (not
// evicted: an evicted pod gives them back anyway), or finished for good.
func reclaimsFinished(d *desiredPod, v podView) bool {
	if d.state == podSyncing {
		return finishedForGood(d, v)
	}
	return !d.stop.evicted()
}

// syncPlan is planSyncing's work in progress.
type syncPlan struct {
	d      *desiredPod
	st     *podState
	uid    string
	grace  time.Duration
	latest map[string]podspec.ContainerStatus
	// acts are the kills first; starts the starts, after the sandbox.
	acts, starts []action
}

// planSyncing runs init containers one by one to completion, then starts or
// restarts regular containers per restartPolicy; a pod whose regular
// containers have all finished for good stops its sidecars. Its steps come
// after strays', the removal of stray containers.
func planSyncing(d *desiredPod, v podView, strays []action) []action {
	if reset := planRestartAll(d, v); len(reset) > 0 {
		return append(strays, reset...)
	}
	p := &syncPlan{d: d, st: v.st, uid: string(d.pod.UID), grace: podGrace(d.pod), latest: v.latest, acts: strays}
	pod := d.pod
	// Once a regular container has been made, the pod stays initialized:
	// init containers do not run again, sidecars restart without holding
	// anything back (the kubelet's hasAnyRegularContainerCreated).
	initialized := slices.ContainsFunc(pod.Spec.Containers, func(c v1.Container) bool { _, ok := v.latest[c.Name]; return ok })
	finished := finishedForGood(d, v)
	if p.initContainers(initialized, finished) {
		p.regularContainers()
	}
	if finished {
		var sidecars []podspec.ContainerStatus
		for _, c := range pod.Spec.InitContainers {
			if l, ok := v.latest[c.Name]; ok && isSidecar(&c) {
				sidecars = append(sidecars, l)
			}
		}
		p.acts = append(p.acts, stopContainers(v.st, sidecars, p.grace)...)
	}
	starts := slices.DeleteFunc(p.starts, func(a action) bool { return d.hashes[a.container] == "" || v.st.postStarting })
	if len(starts) > 0 && (!v.st.sandbox || v.st.unprepared) {
		p.acts = append(p.acts, action{kind: actSandbox, podUID: p.uid})
	}
	return append(p.acts, starts...)
}

// finishedForGood: every regular container has finished for good (by its
// restartPolicyRules, its restartPolicy or the pod's), so the sidecars are
// stopped and not restarted, and nothing starts again.
func finishedForGood(d *desiredPod, v podView) bool {
	pod := d.pod
	// By index: a copy of each container, its address taken, was made on
	// the heap at every sync.
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		l, ok := v.latest[c.Name]
		if !ok || l.State != podspec.StateExited || shouldRestart(c, pod.Spec.RestartPolicy, l.ExitCode) ||
			(v.st.unhealthy[l.ID] != "" && restartsAfterKill(c, pod.Spec.RestartPolicy)) {
			return false
		}
	}
	return len(pod.Spec.Containers) > 0
}

// planRestartAll is the kubelet's RestartAllContainers (computePodActions
// once the pod's AllContainersRestarting condition is true): when the
// newest instance of a container exited with a code one of its
// RestartAllContainers rules matches, every container of the pod is
// stopped without its preStop hook or grace period (the least,
// manifest.MinimumGracePeriod) and removed, one by one: regular containers,
// then init containers, then the ones that exited so. The sandbox and
// volumes stay; the next sync runs the pod again from its first init
// container, each container as its next attempt. Nil when no rule matched.
func planRestartAll(d *desiredPod, v podView) []action {
	// Whether a rule matched, first: what the plan lists is made only then.
	matched := func(list []v1.Container) bool {
		for j := range list {
			l, ok := v.latest[list[j].Name]
			if ok && v.real(l.ID) && l.State == podspec.StateExited && status.RestartsAll(&list[j], l.ExitCode) {
				return true
			}
		}
		return false
	}
	if !matched(d.pod.Spec.Containers) && !matched(d.pod.Spec.InitContainers) {
		return nil
	}
	var sources, targets [2][]podspec.ContainerStatus // [0] regular, [1] init
	triggered := false
	for i, list := range [][]v1.Container{d.pod.Spec.Containers, d.pod.Spec.InitContainers} {
		for j := range list {
			l, ok := v.latest[list[j].Name]
			if !ok || !v.real(l.ID) {
				continue
			}
			if l.State == podspec.StateExited && status.RestartsAll(&list[j], l.ExitCode) {
				sources[i] = append(sources[i], l)
				triggered = true
			} else {
				targets[i] = append(targets[i], l)
			}
		}
	}
	if !triggered {
		return nil
	}
	uid := string(d.pod.UID)
	var acts []action
	for _, l := range slices.Concat(targets[0], targets[1], sources[0], sources[1]) {
		if l.State != podspec.StateExited {
			// The kubelet's killContainer with the message "killing".
			acts = append(acts, action{kind: actKill, podUID: uid, container: l.Name, id: l.ID,
				grace: manifest.MinimumGracePeriod, reason: "killing", restartAll: true})
		}
		acts = append(acts, action{kind: actDestroy, podUID: uid, container: l.Name, id: l.ID, restartAll: true})
	}
	return acts
}

// kill stops container c's instance l, with reason when not the pod's stop.
func (p *syncPlan) kill(c *v1.Container, l podspec.ContainerStatus, grace time.Duration, reason string) {
	p.acts = append(p.acts, action{kind: actKill, podUID: p.uid, container: c.Name, id: l.ID, grace: grace, reason: reason})
}

// start starts container c, after prev when there is one.
func (p *syncPlan) start(c *v1.Container, prev *podspec.ContainerStatus) {
	p.starts = append(p.starts, startAction(p.d, p.uid, c.Name, prev))
}

// restart stops a running container to start it again, and reports
// whether it did: its spec changed under the same UID, its postStart hook
// or a probe failed.
func (p *syncPlan) restart(c *v1.Container, l podspec.ContainerStatus) bool {
	if h := p.d.hashes[c.Name]; h != "" && l.Hash != h {
		// The spec changed under the same UID: restart whatever the policy.
		p.kill(c, l, p.grace, fmt.Sprintf("Container %s definition changed, will be restarted", c.Name))
		p.start(c, &l)
		return true
	}
	if p.st.hookFailed[l.ID] {
		// The kubelet's startContainer kills it, then it restarts per
		// restartPolicy as any exited container.
		p.kill(c, l, p.grace, reasonFailedPostStart)
		return true
	}
	if kind := p.st.unhealthy[l.ID]; kind != "" {
		// The kubelet's computePodActions: killed, and restarted once it
		// has exited, whatever its exit code, unless the policy is Never
		// (a sidecar's is always Always).
		p.kill(c, l, probeGrace(p.d.pod, c, kind), probeKillReason(p.d.pod, c, kind))
		return true
	}
	return false
}

// initContainers plans the init containers in order, and reports whether
// they are done: each has completed, or is a sidecar that runs and has
// started.
func (p *syncPlan) initContainers(initialized, finished bool) bool {
	pod := p.d.pod
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		l, ok := p.latest[c.Name]
		if isSidecar(c) {
			switch {
			case finished:
				continue
			case !ok:
				p.start(c, nil)
			case l.State == podspec.StateCreated:
				p.kill(c, l, p.grace, "")
				p.start(c, &l)
			case l.State == podspec.StateExited:
				p.start(c, &l)
			case p.restart(c, l):
			case !p.st.unstarted[l.ID]:
				continue // running and started: the next one may go
			}
			if initialized {
				continue
			}
			return false
		}
		if initialized || (ok && l.State == podspec.StateExited && l.ExitCode == 0) {
			continue
		}
		switch {
		case !ok:
			p.start(c, nil)
		case l.State != podspec.StateExited:
			// running: wait for it
		case shouldRestart(c, pod.Spec.RestartPolicy, l.ExitCode):
			p.start(c, &l)
		}
		return false
	}
	return true
}

// regularContainers starts or restarts the regular containers per
// restartPolicy.
func (p *syncPlan) regularContainers() {
	pod := p.d.pod
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		l, ok := p.latest[c.Name]
		switch {
		case !ok:
			p.start(c, nil)
		case l.State == podspec.StateCreated:
			// Made but never started (a daemon died in between): start afresh.
			p.kill(c, l, p.grace, "")
			p.start(c, &l)
		case l.State != podspec.StateExited:
			p.restart(c, l)
		case shouldRestart(c, pod.Spec.RestartPolicy, l.ExitCode),
			p.st.unhealthy[l.ID] != "" && restartsAfterKill(c, pod.Spec.RestartPolicy):
			p.start(c, &l)
		}
	}
}

func startAction(d *desiredPod, uid, name string, prev *podspec.ContainerStatus) action {
	a := action{kind: actStart, podUID: uid, container: name}
	if prev != nil {
		a.attempt = prev.Attempt + 1
		a.prevID = prev.ID
	} else if d != nil {
		a.attempt = d.firstAttempt[name]
	}
	return a
}

func podGrace(pod *v1.Pod) time.Duration {
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		return max(time.Duration(*s)*time.Second, manifest.MinimumGracePeriod)
	}
	return defaultGrace
}
