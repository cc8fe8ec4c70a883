package agent

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// generation is what the worker remembers about the desired UID beyond what the
// runtime reports: where it is in its life, why containers wait, what they
// ran before.
type generation struct {
	uid    string
	policy v1.RestartPolicy
	// The generation's life, as the kubelet's podSyncStatus records it:
	// syncedAt is its first sync, terminatingAt when it was told to stop,
	// terminatedAt when nothing of it ran any more. Its state follows.
	syncedAt, terminatingAt, terminatedAt time.Time
	// stop is why the pod was told to stop, and how (grace): past its
	// deadline (for good) or evicted (until the agent lifts it). Set with
	// terminatingAt.
	stop *stopRequest
	// final is the last status of each container of a stopped pod, or of
	// one reclaim asked, shown once the containers are removed (an evicted
	// pod releases them, reclaim removes them).
	final   map[string]podspec.ContainerStatus
	hashes  map[string]string
	convErr map[string]error
	// sandbox is the sandbox's runtime spec, converted from the pod
	// sandboxOf (sandboxSpec).
	sandbox   *podspec.Pod
	sandboxOf *v1.Pod
	ctrs      map[string]*ctrInfo
	startTime time.Time
	// recreate: the manifest was removed and written again; once stopped,
	// the pod starts again as a new generation of the same UID.
	recreate bool
	// firstAttempt, for a pod of a UID removed less than attemptsMemory
	// ago, is the attempt each container starts as when none of it is
	// left: its restarts count on, as the kubelet's do from the dead
	// containers it still has.
	firstAttempt map[string]int
	// restartedAll: the pod has restarted all its containers in place
	// once at least (removedToRestartAll); it stays initialized.
	restartedAll bool
	// dependencyWait: the generation waited for the pods it starts after,
	// and said so once (waitForDependencies).
	dependencyWait bool
}

// state is where the generation is in its life.
func (g *generation) state() podWorkState {
	switch {
	case !g.terminatedAt.IsZero():
		return podTerminated
	case !g.terminatingAt.IsZero():
		return podTerminating
	}
	return podSyncing
}

// terminate moves a syncing generation to terminating, for req; one already
// told to stop keeps its first reason. It reports whether it moved.
func (g *generation) terminate(req *stopRequest, now time.Time) bool {
	if g.stop != nil {
		return false
	}
	g.stop, g.terminatingAt = req, now
	return true
}

// settle makes a terminating generation terminated, at now, once nothing of
// d runs in st (desiredPod.stopped).
func (g *generation) settle(d *desiredPod, st *podState, now time.Time) {
	if g.state() == podTerminating && d.stopped(st) {
		g.terminatedAt = now
	}
}

// evicted makes the syncing desired generation terminating, with the
// eviction's reason and grace.
func (w *worker) evicted(pod *v1.Pod, evict *stopRequest) {
	if !w.gen.terminate(evict, time.Now()) {
		return
	}
	w.logger.Info("evicting pod", "reason", evict.reason, "message", evict.message, "grace", evict.grace)
	w.a.events.Eventf(events.PodRef(pod), v1.EventTypeWarning, evict.reason, "%s", evict.message)
}

// evictionLifted makes an evicted pod start afresh, as a new generation
// (the kubelet would see a new pod): the containers of the run the eviction
// ended are marked ended, for plan to remove before anything starts.
func (w *worker) evictionLifted(pod *v1.Pod) {
	if st := w.pods[w.gen.uid]; st != nil {
		st.ended = map[string]bool{}
		for _, c := range st.containers {
			st.ended[c.ID] = true
		}
	}
	w.logger.Info("eviction lifted, starting pod again")
	w.forgetBackoff(w.gen.uid)
	w.forgetFinal(w.gen.uid)
	w.gen = nil
	w.resolve(pod)
	w.gen.startTime = time.Now()
}

// recreated starts a pod stopped because its manifest was recreated again,
// as a new generation of the same UID. Unlike an eviction's lift, its exited
// containers stay: each starts again as their next attempt, restartCount 1
// and on, as the kubelet's restarted pod does.
func (w *worker) recreated(pod *v1.Pod) {
	w.logger.Info("starting the pod of the recreated manifest again")
	w.forgetBackoff(w.gen.uid)
	w.forgetFinal(w.gen.uid)
	w.gen = nil
	w.resolve(pod)
	w.gen.startTime = time.Now()
}
