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
	attempt   int    // start
	prevID    string // start: the exited container this one replaces
}

// desiredPod is the pod to run with the hash of each container's resolved spec.
// A container without a hash could not be resolved and is not started.
type desiredPod struct {
	pod    *v1.Pod
	hashes map[string]string
	// stop, when set, is the worker's lifecycle past syncing: the pod is
	// terminating (then terminated) for stop.reason, its containers are
	// stopped and none is started until the stop is withdrawn.
	stop *stopRequest
	// discard are the containers, by ID, of a run that ended for good
	// (an eviction since lifted): removed before the pod starts afresh.
	discard map[string]bool
	// pruneDead: node-level reclaim asks a stopped or finished pod to
	// remove its exited containers (their writable layers) too.
	pruneDead bool
	// final are the last instances of containers removed that way, by name:
	// they count as exited, so nothing starts them again.
	final map[string]podspec.ContainerStatus
}

// stopRequest is why a pod is stopped and kept stopped, as the kubelet's pod
// workers take a kill with a reason and a grace period override
// (UpdatePodOptions.KillPodOptions): its active deadline passed
// (reasonDeadlineExceeded, for good) or it was evicted (reasonEvicted, until
// the pressure is gone).
type stopRequest struct {
	reason, message string
	// grace overrides the pod's terminationGracePeriodSeconds when > 0.
	grace time.Duration
	// release: once its containers have stopped, the pod gives back what
	// it holds, as the kubelet's terminated pod does (syncTerminatedPod):
	// its containers, then its sandbox, volumes (a memory-backed emptyDir
	// is memory) and logs are removed. An evicted pod does.
	release bool
}

// podState is what the runtime has for one pod UID, as a worker knows it.
type podState struct {
	uid     string
	sandbox bool
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
}

// The plan reads a pod's containers as its status does: which are sidecars,
// which restart, which instance is the current one.
var (
	isSidecar     = status.IsSidecar
	shouldRestart = status.ShouldRestart
	latestByName  = status.LatestByName
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
	cur := actual[string(desired.pod.UID)]
	if cur == nil {
		cur = &podState{uid: string(desired.pod.UID)}
	}
	return append(acts, runPod(desired, cur)...)
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

// runPod plans the desired pod: clean up stray containers, run init containers one
// by one to completion, then start or restart regular containers per restartPolicy.
func runPod(d *desiredPod, st *podState) []action {
	pod := d.pod
	uid := string(pod.UID)
	grace := podGrace(pod)
	known := map[string]bool{}
	for _, c := range pod.Spec.InitContainers {
		known[c.Name] = true
	}
	for _, c := range pod.Spec.Containers {
		known[c.Name] = true
	}

	var acts []action
	// The containers of a run that ended for good go first: the pod starts
	// afresh without them.
	if len(d.discard) > 0 {
		kept := make([]podspec.ContainerStatus, 0, len(st.containers))
		for _, c := range st.containers {
			if !d.discard[c.ID] {
				kept = append(kept, c)
				continue
			}
			if c.State != podspec.StateExited {
				acts = append(acts, action{kind: actKill, podUID: uid, container: c.Name, id: c.ID, grace: grace})
			}
			acts = append(acts, action{kind: actDestroy, podUID: uid, container: c.Name, id: c.ID})
		}
		cp := *st
		cp.containers = kept
		st = &cp
	}
	// Containers of no spec, and older instances of a name: remove them.
	latest := latestByName(st.containers)
	for _, c := range st.containers {
		if known[c.Name] && latest[c.Name].ID == c.ID {
			continue
		}
		if c.State != podspec.StateExited {
			acts = append(acts, action{kind: actKill, podUID: uid, container: c.Name, id: c.ID, grace: grace})
		}
		acts = append(acts, action{kind: actDestroy, podUID: uid, container: c.Name, id: c.ID})
	}
	real := map[string]bool{}
	for _, c := range st.containers {
		real[c.ID] = true
	}
	for name, c := range d.final {
		if _, ok := latest[name]; !ok {
			latest[name] = c // removed by reclaim once it had finished
		}
	}

	if d.stop != nil {
		// Terminating: everything stops, nothing starts (the kubelet's
		// terminal phase), what exited stays for its status.
		if d.stop.grace > 0 {
			grace = max(d.stop.grace, manifest.MinimumGracePeriod)
		}
		names := slices.Sorted(maps.Keys(latest))
		running := make([]podspec.ContainerStatus, 0, len(names))
		for _, n := range names {
			running = append(running, latest[n])
		}
		acts = append(acts, stopContainers(st, running, grace)...)
		if d.stop.release {
			// Terminated: once everything has stopped, nothing is kept.
			if len(acts) > 0 {
				return acts
			}
			for _, c := range st.containers {
				acts = append(acts, action{kind: actDestroy, podUID: uid, container: c.Name, id: c.ID})
			}
			if st.sandbox || len(st.containers) > 0 {
				acts = append(acts, action{kind: actTeardown, podUID: uid})
			}
			return acts
		}
		if d.pruneDead {
			for _, n := range names {
				if c := latest[n]; c.State == podspec.StateExited && real[c.ID] {
					acts = append(acts, action{kind: actDestroy, podUID: uid, container: c.Name, id: c.ID})
				}
			}
		}
		return acts
	}
	var starts []action
	// restart is a running container to stop and start again: its spec
	// changed under the same UID, or a probe failed.
	restart := func(c *v1.Container, l podspec.ContainerStatus) bool {
		if h := d.hashes[c.Name]; h != "" && l.Hash != h {
			// The spec changed under the same UID: restart whatever the policy.
			acts = append(acts, action{kind: actKill, podUID: uid, container: c.Name, id: l.ID, grace: grace,
				reason: fmt.Sprintf("Container %s definition changed, will be restarted", c.Name)})
			starts = append(starts, startAction(d, uid, c.Name, &l))
			return true
		}
		if st.hookFailed[l.ID] {
			// The kubelet's startContainer kills it, then it restarts per
			// restartPolicy as any exited container.
			acts = append(acts, action{kind: actKill, podUID: uid, container: c.Name, id: l.ID, grace: grace,
				reason: reasonFailedPostStart})
			return true
		}
		if kind := st.unhealthy[l.ID]; kind != "" {
			// The kubelet's computePodActions: killed, and restarted once it
			// has exited, whatever its exit code, unless the policy is Never
			// (a sidecar's is always Always).
			acts = append(acts, action{kind: actKill, podUID: uid, container: c.Name, id: l.ID,
				grace: probeGrace(pod, c, kind), reason: probeKillReason(pod, c, kind)})
			return true
		}
		return false
	}
	// Once a regular container has been made, the pod stays initialized:
	// init containers do not run again, sidecars restart without holding
	// anything back (the kubelet's hasAnyRegularContainerCreated).
	initialized := slices.ContainsFunc(pod.Spec.Containers, func(c v1.Container) bool { _, ok := latest[c.Name]; return ok })
	// Under Never or OnFailure, once every regular container has finished
	// for good, the sidecars are stopped and not restarted.
	finished := pod.Spec.RestartPolicy != v1.RestartPolicyAlways && len(pod.Spec.Containers) > 0 &&
		!slices.ContainsFunc(pod.Spec.Containers, func(c v1.Container) bool {
			l, ok := latest[c.Name]
			return !ok || l.State != podspec.StateExited || shouldRestart(pod.Spec.RestartPolicy, l.ExitCode) ||
				(st.unhealthy[l.ID] != "" && pod.Spec.RestartPolicy != v1.RestartPolicyNever)
		})
	initDone := true
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		l, ok := latest[c.Name]
		if isSidecar(c) {
			switch {
			case finished:
				continue
			case !ok:
				starts = append(starts, startAction(d, uid, c.Name, nil))
			case l.State == podspec.StateCreated:
				acts = append(acts, action{kind: actKill, podUID: uid, container: c.Name, id: l.ID, grace: grace})
				starts = append(starts, startAction(d, uid, c.Name, &l))
			case l.State == podspec.StateExited:
				starts = append(starts, startAction(d, uid, c.Name, &l))
			case restart(c, l):
			case !st.unstarted[l.ID]:
				continue // running and started: the next one may go
			}
			if initialized {
				continue
			}
			initDone = false
			break
		}
		if initialized || (ok && l.State == podspec.StateExited && l.ExitCode == 0) {
			continue
		}
		initDone = false
		switch {
		case !ok:
			starts = append(starts, startAction(d, uid, c.Name, nil))
		case l.State != podspec.StateExited:
			// running: wait for it
		case pod.Spec.RestartPolicy != v1.RestartPolicyNever:
			starts = append(starts, startAction(d, uid, c.Name, &l))
		}
		break
	}
	if initDone {
		for i := range pod.Spec.Containers {
			c := &pod.Spec.Containers[i]
			l, ok := latest[c.Name]
			switch {
			case !ok:
				starts = append(starts, startAction(d, uid, c.Name, nil))
			case l.State == podspec.StateCreated:
				// Made but never started (a daemon died in between): start afresh.
				acts = append(acts, action{kind: actKill, podUID: uid, container: c.Name, id: l.ID, grace: grace})
				starts = append(starts, startAction(d, uid, c.Name, &l))
			case l.State != podspec.StateExited:
				restart(c, l)
			case shouldRestart(pod.Spec.RestartPolicy, l.ExitCode),
				st.unhealthy[l.ID] != "" && pod.Spec.RestartPolicy != v1.RestartPolicyNever:
				starts = append(starts, startAction(d, uid, c.Name, &l))
			}
		}
	}
	if finished {
		var sidecars []podspec.ContainerStatus
		for _, c := range pod.Spec.InitContainers {
			if l, ok := latest[c.Name]; ok && isSidecar(&c) {
				sidecars = append(sidecars, l)
			}
		}
		acts = append(acts, stopContainers(st, sidecars, grace)...)
		if d.pruneDead && len(acts) == 0 {
			// Finished for good and nothing runs: reclaim may remove them.
			for _, n := range slices.Sorted(maps.Keys(latest)) {
				if c := latest[n]; c.State == podspec.StateExited && real[c.ID] {
					acts = append(acts, action{kind: actDestroy, podUID: uid, container: c.Name, id: c.ID})
				}
			}
		}
	}
	starts = slices.DeleteFunc(starts, func(a action) bool { return d.hashes[a.container] == "" || st.postStarting })
	if len(starts) > 0 && !st.sandbox {
		acts = append(acts, action{kind: actSandbox, podUID: uid})
	}
	return append(acts, starts...)
}

func startAction(d *desiredPod, uid, name string, prev *podspec.ContainerStatus) action {
	a := action{kind: actStart, podUID: uid, container: name}
	if prev != nil {
		a.attempt = prev.Attempt + 1
		a.prevID = prev.ID
	}
	return a
}

func podGrace(pod *v1.Pod) time.Duration {
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		return max(time.Duration(*s)*time.Second, manifest.MinimumGracePeriod)
	}
	return defaultGrace
}
