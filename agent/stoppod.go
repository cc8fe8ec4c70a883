package agent

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// reasonStoppedByRuntime is the pod status reason of a pod stopped through
// the CRI (StopPodSandbox, RemovePodSandbox: kubeadm reset, crictl stopp),
// while it is held stopped.
const reasonStoppedByRuntime = "StoppedByRuntime"

// stopHold is how long a pod stopped through the CRI stays stopped before
// its worker makes it again from its manifest: the kubelet's first restart
// back-off, which its containers would wait after containerd removed them.
const stopHold = backoffInitial

// stopSandboxGrace is the grace a pod stopped through the CRI gets, whatever
// its terminationGracePeriodSeconds: the CRI says the containers left in a
// sandbox it stops "must be forcibly terminated", and containerd kills them
// at once (stopContainer with timeout 0). The caller, kubeadm reset, gives
// each StopPodSandbox 2 s; a kube-apiserver whose etcd is gone would take its
// whole 30 s, and its manifest would bring the pods stopped before it back
// meanwhile. The stop signal still goes first, then SIGKILL after this.
const stopSandboxGrace = time.Second

// stopPollPeriod is how often StopPod looks at the runtime between status
// changes: the removal of a sandbox changes no status.
const stopPollPeriod = 100 * time.Millisecond

// Containers are every container the runtime has, running or exited.
func (a *Agent) Containers(ctx context.Context) ([]podspec.ContainerStatus, error) {
	return a.rt.List(ctx)
}

// Sandboxes are the UIDs of the pods that have a sandbox.
func (a *Agent) Sandboxes(ctx context.Context) ([]string, error) { return a.rt.ListSandboxes(ctx) }

// SandboxStatus is the sandbox of pod uid's place on the pod network.
func (a *Agent) SandboxStatus(ctx context.Context, uid string) (podspec.SandboxStatus, error) {
	return a.rt.SandboxStatus(ctx, uid)
}

// StopPod is the CRI's StopPodSandbox and RemovePodSandbox: the pod uid is
// stopped now as an eviction stops it (its containers within its grace
// period, then its containers, sandbox, volumes and logs removed), and it
// returns once the runtime has nothing of it left. Like a pod whose sandbox
// containerd removed under the kubelet, a pod whose manifest is still there
// is made again, as a new run, after stopHold; one whose manifest is gone
// by then stays gone (kubeadm reset removes /etc/kubernetes/manifests right
// after its StopPodSandbox and RemovePodSandbox calls). A pod the eviction
// manager holds stays held by it. A call that comes before every source
// has been read (a CRI call that socket activation started the daemon for)
// waits for the first full reconcile, which hands every pod found running to
// a worker: before, a pod found running belongs to none, and its manifest
// would make it again.
func (a *Agent) StopPod(ctx context.Context, uid string) error {
	select {
	case <-a.reconciled:
	case <-ctx.Done():
		return fmt.Errorf("the pods found running are kept until every manifest source has been read: %w", context.Cause(ctx))
	}
	req := &stopRequest{reason: reasonStoppedByRuntime, grace: stopSandboxGrace,
		message: "The pod's sandbox was stopped through the CRI; it starts again from its manifest"}
	if w := a.workerOf(uid); w != nil {
		if w.hold(uid, req) {
			a.logger.Info("stopping pod through the CRI", "pod", w.key, "uid", uid, "hold", stopHold)
			// Lifted once the pod is gone (or the caller left), after the
			// hold: the pod starts afresh.
			defer time.AfterFunc(stopHold, func() { w.lift(uid, req) })
		}
	}
	// A pod no longer desired (its manifest removed, or edited to another
	// UID) is stopping with its own grace period: cut that short too.
	a.cutKills(uid, req)
	tick := time.NewTicker(stopPollPeriod)
	defer tick.Stop()
	for {
		changed := a.Changed()
		gone, err := a.gone(ctx, uid)
		if err != nil || gone {
			return err
		}
		select {
		case <-ctx.Done():
			return context.Cause(ctx)
		case <-changed:
		case <-tick.C:
		}
	}
}

// cutKills brings forward every kill of pod uid's containers to end within
// req's grace period, whichever worker holds the pod (one whose manifest
// is gone stops it with its own grace period, maybe after its turn).
func (a *Agent) cutKills(uid string, req *stopRequest) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for key := range a.held[uid] {
		if w := a.workers[key]; w != nil {
			w.mu.Lock()
			w.cutKillsLocked(uid, req)
			w.mu.Unlock()
		}
	}
}

// workerOf is the worker whose desired pod is uid; nil if none is (an
// orphan, which its worker removes anyway).
func (a *Agent) workerOf(uid string) *worker {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.workers {
		if w.desiredUID() == uid {
			return w
		}
	}
	return nil
}

// gone reports whether the runtime has neither a sandbox nor a container
// of pod uid, and no worker still tears it down.
func (a *Agent) gone(ctx context.Context, uid string) (bool, error) {
	// A worker holds the pod until its teardown is done whole: a sandbox
	// being removed, or whose volumes or logs could not be, is listed no
	// longer (its record goes first) but is not gone.
	a.mu.Lock()
	held := len(a.held[uid]) > 0
	a.mu.Unlock()
	if held {
		return false, nil
	}
	sbs, err := a.rt.ListSandboxes(ctx)
	if err != nil {
		return false, err
	}
	if slices.Contains(sbs, uid) {
		return false, nil
	}
	cs, err := a.rt.List(ctx)
	if err != nil {
		return false, err
	}
	return !slices.ContainsFunc(cs, func(c podspec.ContainerStatus) bool { return c.PodUID == uid }), nil
}

// hold stops the pod of uid for req and keeps it stopped until lift, unless
// a stop is in force already (an eviction, or an earlier hold); it reports
// whether it set req. Either way a kill of the pod that runs ends within
// req's grace period.
func (w *worker) hold(uid string, req *stopRequest) bool {
	w.mu.Lock()
	w.cutKillsLocked(uid, req)
	if w.box.evict != nil && w.box.evictUID == uid {
		w.mu.Unlock()
		return false
	}
	w.box.evict, w.box.evictUID = req, uid
	w.mu.Unlock()
	w.nudge()
	return true
}

// lift ends the hold req, if it is still the stop in force: the pod starts
// afresh, as after an eviction.
func (w *worker) lift(uid string, req *stopRequest) {
	w.mu.Lock()
	if w.box.evict != req || w.box.evictUID != uid {
		w.mu.Unlock()
		return
	}
	w.box.evict, w.box.evictUID = nil, ""
	w.forgetCutLocked(uid)
	w.mu.Unlock()
	w.logger.Info("pod stopped through the CRI starts again", "uid", uid)
	w.nudge()
}
