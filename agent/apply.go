package agent

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/images"
	"github.com/staticpodd/staticpodd/agent/lifecycle"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/status"
	"github.com/staticpodd/staticpodd/agent/volumes"
)

// killWait bounds the wait for a container after SIGKILL.
const killWait = 10 * time.Second

// Waiting reasons, as the kubelet reports them (defined in agent/status).
const (
	reasonCrashLoop      = status.CrashLoopBackOff
	reasonImageNeverPull = status.ErrImageNeverPull
	reasonConfigError    = status.CreateContainerConfigError
	reasonCreateError    = status.CreateContainerError
	reasonRunError       = status.RunContainerError
	reasonCreating       = status.ContainerCreating
	// A container whose postStart hook failed waits with it until its
	// restart (the kubelet's ErrPostStartHook).
	reasonPostStartHookError = status.PostStartHookError
)

// reasonFailedPostStart is why a container whose postStart hook failed is
// killed (the kubelet's killContainer message).
const reasonFailedPostStart = "FailedPostStartHook"

// The kubelet's reason and message for a pod past its activeDeadlineSeconds
// (pkg/kubelet/active_deadline.go).
const (
	reasonDeadlineExceeded  = status.DeadlineExceeded
	messageDeadlineExceeded = "Pod was active on the node longer than the specified deadline"
)

// reasonEvicted is the kubelet's reason of a pod its eviction manager stopped.
const reasonEvicted = status.Evicted

// apply runs acts in order and returns when the worker should sync again (zero:
// only when something happens). A failed kill, destroy, teardown or sandbox stops
// the steps after it; a container that cannot start does not stop the others.
func (w *worker) apply(ctx context.Context, pod *v1.Pod, acts []action) time.Time {
	var retry time.Time
	later := func(t time.Time) {
		if !t.IsZero() && (retry.IsZero() || t.Before(retry)) {
			retry = t
		}
	}
	// The grace period of a pod's stop counts from its first kill: sidecars,
	// stopped after the others, get what is left of it (at least manifest.MinimumGracePeriod).
	killStart := map[string]time.Time{}
	resetChecked := false
	defer w.joinRecording()
	for i := 0; i < len(acts); i++ {
		act := acts[i]
		if ctx.Err() != nil {
			return time.Time{}
		}
		if act.restartAll && !resetChecked {
			resetChecked = true
			if until := w.restartAllBackoff(pod); !until.IsZero() {
				later(until)
				return retry
			}
		}
		if act.kind == actStart && w.hooks.PodRunning(act.podUID) {
			// A container just started runs its postStart hook: the
			// others wait for it, as in the kubelet. Its end syncs again.
			return retry
		}
		if (act.kind == actSandbox || act.kind == actStart) && w.superseded(pod) {
			// A newer manifest came while older steps ran (a stop can take the
			// whole grace period): start nothing of a generation already stale.
			// update() nudged the worker, so it syncs again at once.
			return time.Time{}
		}
		var err error
		switch act.kind {
		case actKill:
			// Kills of one group run side by side, as the kubelet kills a
			// pod's containers in parallel.
			j := i + 1
			for j < len(acts) && acts[j].kind == actKill && acts[j].group == act.group && acts[j].podUID == act.podUID {
				j++
			}
			if _, ok := killStart[act.podUID]; !ok {
				killStart[act.podUID] = time.Now()
			}
			err = w.killAll(ctx, pod, acts[i:j], killStart[act.podUID])
			i = j - 1
		case actDestroy:
			var removed *podspec.ContainerStatus
			if st := w.pods[act.podUID]; st != nil && act.restartAll {
				removed = st.instance(act.id)
			}
			err = w.destroy(ctx, act.podUID, act.id)
			if err == nil && removed != nil {
				w.removedToRestartAll(*removed)
				// The kubelet syncs again at once to start the pod afresh.
				later(time.Now())
			}
		case actTeardown:
			err = w.teardown(ctx, act.podUID)
		case actSandbox:
			if w.waitForDependencies(pod) {
				return retry // nudged when a pod it starts after turns Ready
			}
			if !w.holdUID(pod) {
				return time.Time{} // superseded since the check above, as there
			}
			err = w.sandbox(ctx, pod, firstImage(pod, acts[i+1:]))
		case actStart:
			retry := w.start(ctx, pod, act)
			if c := findContainer(pod, act.container); retry.IsZero() && c != nil && isSidecar(c) && w.info(c.Name).reason == "" {
				// A started sidecar may let the next container go: plan
				// again at once (one with a startup probe waits for it).
				retry = time.Now()
			}
			later(retry)
		}
		if err != nil {
			if ctx.Err() == nil {
				w.logger.Error("pod step failed", "step", act.kind.String(), "uid", act.podUID, "container", act.container, "err", err)
			}
			later(time.Now().Add(backoffInitial))
			return retry
		}
	}
	return retry
}

// superseded reports whether pod is no longer the one to run: an edit (a new
// UID) or a removal came since the sync began.
func (w *worker) superseded(pod *v1.Pod) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.box.desired == nil || w.box.desired.UID != pod.UID
}

// killAll stops the containers of acts side by side and records what
// became of them. A kill whose action says remaining gets what is left of
// its grace period since killStart.
func (w *worker) killAll(ctx context.Context, pod *v1.Pod, acts []action, killStart time.Time) error {
	type result struct {
		id   string
		st   podspec.ContainerStatus
		gone bool
		err  error
	}
	results := make(chan result, len(acts))
	for _, act := range acts {
		if act.reason != "" {
			w.logger.Info("killing container", "container", act.container, "id", act.id, "reason", act.reason)
		}
		w.killingEvent(pod, act)
		grace := act.grace
		if act.remaining {
			grace = max(act.grace-time.Since(killStart), manifest.MinimumGracePeriod)
		}
		sig := w.stopSignal(act.podUID, act.id)
		w.hooks.Cancel(act.id)
		pre := w.preStopOf(act)
		clock := w.newKillClock(act.podUID, grace)
		go func() {
			defer w.endKillClock(clock)
			st, gone, err := w.kill(ctx, act.id, sig, clock, pre)
			results <- result{act.id, st, gone, err}
		}()
	}
	var errs []error
	for range acts {
		r := <-results
		switch {
		case r.err != nil:
			errs = append(errs, r.err)
		case r.gone:
			w.forget(r.id)
		default:
			w.recordStopped(r.st)
		}
	}
	return errors.Join(errs...)
}

// kill stops a running container the Nomad way, after its preStop hook if
// pre is one: its stop signal (SIGTERM unless it or its image says
// otherwise), wait until clock's deadline, but at least
// manifest.MinimumGracePeriod after the hook (the kubelet's killContainer),
// SIGKILL, wait a bounded time. A stop of the pod with a shorter grace
// period brings the deadline forward while it waits (cutKillsLocked). It
// touches nothing of the worker's but its logger: killAll records the
// outcome. gone: the runtime has no such container.
func (w *worker) kill(ctx context.Context, id string, sig syscall.Signal, clock *killClock, pre *lifecycle.PreStop) (st podspec.ContainerStatus, gone bool, err error) {
	if pre != nil {
		hctx, done := w.killWait(ctx, clock, time.Time{})
		st, exited := pre.Run(hctx, id, w.left(clock))
		done()
		if exited {
			return st, false, nil
		}
		if ctx.Err() != nil {
			return st, false, ctx.Err()
		}
	}
	// The stop signal gets manifest.MinimumGracePeriod after a hook.
	var floor time.Time
	if pre != nil {
		floor = time.Now().Add(manifest.MinimumGracePeriod)
	}
	wctx, done := w.killWait(ctx, clock, floor)
	defer done()
	signalled := time.Now()
	w.logger.Info("stopping container", "id", id, "signal", sig, "grace", w.left(clock).Round(time.Millisecond))
	if err := w.a.rt.Signal(ctx, id, sig); errors.Is(err, podspec.ErrNotExist) {
		return st, true, nil
	}
	// A failed stop signal (the container just exited, say) still waits: Wait tells.
	if st, err := w.waitExited(wctx, id); err == nil {
		return st, false, nil
	}
	if ctx.Err() != nil {
		return st, false, ctx.Err()
	}
	w.logger.Warn("container outlived its stop signal, killing it", "id", id, "signal", sig, "grace", time.Since(signalled).Round(time.Millisecond))
	if err := w.a.rt.Signal(ctx, id, syscall.SIGKILL); errors.Is(err, podspec.ErrNotExist) {
		return st, true, nil
	}
	st, err = w.waitFor(ctx, id, killWait)
	if err != nil {
		return st, false, fmt.Errorf("wait for container %s after SIGKILL: %w", id, err)
	}
	return st, false, nil
}

// stopSignal is the signal that stops container id of pod uid, as the
// runtime recorded it when it started the container (lifecycle.stopSignal,
// the image's StopSignal, or SIGTERM); SIGTERM when unknown (the kubelet's
// ContainerStopSignals).
func (w *worker) stopSignal(uid, id string) syscall.Signal {
	if st := w.pods[uid]; st != nil {
		for _, c := range st.containers {
			if c.ID == id && c.StopSignal != 0 {
				return c.StopSignal
			}
		}
	}
	return syscall.SIGTERM
}

// recordStopped takes the exit of a container the worker stopped.
func (w *worker) recordStopped(st podspec.ContainerStatus) {
	if c, exited := w.record(st); exited {
		w.logExit(c, true)
	}
}

// killingEvent records the kubelet's Killing event for a kill step, about
// the pod generation the container belongs to.
func (w *worker) killingEvent(desired *v1.Pod, act action) {
	pod := desired
	if pod == nil || string(pod.UID) != act.podUID {
		pod = w.podOf(act.podUID)
	}
	if pod == nil {
		return
	}
	msg := act.reason
	if msg == "" {
		msg = "Stopping container " + act.container
	}
	w.a.events.Eventf(events.ContainerRef(pod, act.container), v1.EventTypeNormal, events.Killing, "%s", msg)
}

func (w *worker) waitFor(ctx context.Context, id string, d time.Duration) (podspec.ContainerStatus, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	return w.waitExited(ctx, id)
}

// waitExited waits until container id has exited, or ctx ends.
func (w *worker) waitExited(ctx context.Context, id string) (podspec.ContainerStatus, error) {
	st, err := w.a.rt.Wait(ctx, id)
	if err == nil && st.ID == "" {
		st.ID = id
	}
	if err == nil && st.State != podspec.StateExited {
		st.State = podspec.StateExited
	}
	return st, err
}

func (w *worker) destroy(ctx context.Context, podUID, id string) error {
	if err := w.a.rt.Destroy(ctx, id); err != nil && !errors.Is(err, podspec.ErrNotExist) {
		return fmt.Errorf("destroy container %s: %w", id, err)
	}
	w.forget(id)
	return nil
}

// restartAllBackoff returns when the pod may restart all its containers
// for the exits that ask it (zero: now), and counts the restart when it may.
// The kubelet restarts them at once every time, so a container that exits
// so at once would churn the whole pod without end: here each such exit
// waits the crash-loop back-off of the container that exited (the first
// not at all, then 10s, 20s... as its own restarts would).
func (w *worker) restartAllBackoff(pod *v1.Pod) time.Time {
	st := w.pods[string(pod.UID)]
	if st == nil {
		return time.Time{}
	}
	now := time.Now()
	type exit struct {
		key string
		at  time.Time
	}
	var exits []exit
	for name, l := range latestByName(st.containers) {
		c := findContainer(pod, name)
		if c == nil || l.State != podspec.StateExited || !status.RestartsAll(c, l.ExitCode) {
			continue
		}
		key := backoffKey(st.uid, name, w.gen.hashes[name])
		if until, d := w.backoff.wait(key, l.FinishedAt, now); !until.IsZero() {
			w.logger.Info("restarting all containers after the back-off", "container", name, "exitCode", l.ExitCode, "backoff", d)
			return until
		}
		exits = append(exits, exit{key, l.FinishedAt})
	}
	for _, e := range exits {
		w.backoff.next(e.key, e.at)
	}
	return time.Time{}
}

// removedToRestartAll remembers container c, removed to restart all its
// pod's containers, as the kubelet shows it until it runs again: waiting,
// RestartingAllContainers, its last termination that reason with exit code
// 137, its restartCount one more; its next instance starts as the attempt
// after c's, with no crash-loop back-off (the kubelet has no dead container
// left to back off from).
func (w *worker) removedToRestartAll(c podspec.ContainerStatus) {
	g := w.gen
	if g == nil || g.uid != c.PodUID {
		return
	}
	if g.firstAttempt == nil {
		g.firstAttempt = map[string]int{}
	}
	g.firstAttempt[c.Name] = c.Attempt + 1
	g.restartedAll = true
	ci := w.info(c.Name)
	ci.reason, ci.message, ci.failedAt = status.RestartingAllContainers, status.RestartingAllContainersMessage, time.Time{}
	ci.last = &podspec.ContainerStatus{Name: c.Name, PodUID: c.PodUID, State: podspec.StateExited,
		ExitCode: status.RestartAllExitCode, Reason: status.RestartingAllContainers, Message: status.RestartingAllContainersMessage}
}

// forget drops a container from what the worker knows.
func (w *worker) forget(id string) {
	for _, ps := range w.pods {
		ps.containers = slices.DeleteFunc(ps.containers, func(c podspec.ContainerStatus) bool { return c.ID == id })
		delete(ps.hookFailed, id)
	}
	delete(w.watching, id)
	w.hooks.Forget(id)
}

// teardown removes the sandbox and volumes of a pod whose containers are gone.
func (w *worker) teardown(ctx context.Context, podUID string) error {
	w.a.stopDebug(ctx, podUID)
	if st := w.pods[podUID]; st != nil {
		// Whatever the removal does (a failed one may have removed the
		// record already), a pod that starts again makes its sandbox
		// first: CreateSandbox keeps a whole one and replaces a partial one.
		st.sandbox, st.network, st.unprepared = false, nil, false
	}
	if err := w.a.rt.RemoveSandbox(ctx, podUID); err != nil {
		return fmt.Errorf("remove sandbox of pod %s: %w", podUID, err)
	}
	if err := w.a.conv.RemoveVolumes(podUID); err != nil {
		return fmt.Errorf("remove volumes of pod %s: %w", podUID, err)
	}
	// A pod that is only replaced by a new generation keeps nothing either: the
	// new UID has a log directory of its own.
	if err := w.a.conv.RemoveLogs(podUID); err != nil {
		return fmt.Errorf("remove logs of pod %s: %w", podUID, err)
	}
	delete(w.pods, podUID)
	w.a.releaseUID(podUID, w.key)
	// After the release: Agent.cutKills no longer reaches this worker for it.
	w.mu.Lock()
	w.forgetCutLocked(podUID)
	w.mu.Unlock()
	w.forgetBackoff(podUID)
	w.logger.Info("pod removed", "uid", podUID)
	return nil
}

// firstImage is the image of the container the steps after a sandbox's
// start first, if they start one first ("" otherwise): the runtime may
// prepare it while it makes the sandbox (podspec.Pod.FirstImage).
func firstImage(pod *v1.Pod, next []action) string {
	if len(next) == 0 || next[0].kind != actStart {
		return ""
	}
	c := findContainer(pod, next[0].container)
	if c == nil {
		return ""
	}
	ref, err := podspec.NormalizeImage(c.Image)
	if err != nil {
		return ""
	}
	return ref
}

func (w *worker) sandbox(ctx context.Context, pod *v1.Pod, first string) error {
	uid := string(pod.UID)
	st := w.pods[uid]
	if st == nil {
		st = &podState{uid: uid, grace: podGrace(pod)}
		w.pods[uid] = st
	}
	sb := *w.sandboxSpec(pod)
	sb.PidsLimit = w.a.cfg.PodPidsLimit
	sb.FirstImage = first
	dns, warnings, err := podDNS(pod, w.a.cfg.ResolvConf)
	for _, msg := range warnings {
		w.logger.Warn("pod DNS configuration cut to the limits", "uid", uid, "msg", msg)
		w.a.events.Eventf(events.PodRef(pod), v1.EventTypeWarning, events.DNSConfigForming, "%s", msg)
	}
	sb.DNS = dns
	if err == nil {
		err = w.a.rt.CreateSandbox(ctx, &sb)
	}
	if err != nil {
		err = fmt.Errorf("create sandbox of pod %s: %w", uid, err)
	} else if err = w.a.conv.PrepareVolumes(pod); err != nil {
		// The kubelet's volume manager says so at each try: the pod is
		// tried again at the next sync, which a new ConfigMap or Secret
		// brings at once (every source update reconciles every pod).
		for _, su := range volumes.SetUpErrors(err) {
			w.a.events.Eventf(events.PodRef(pod), v1.EventTypeWarning, events.FailedMount, "%s", su)
		}
		err = fmt.Errorf("prepare volumes of pod %s: %w", uid, err)
	}
	if err != nil {
		for _, c := range manifest.AllContainers(pod) {
			ci := w.info(c.Name)
			ci.reason, ci.message = reasonCreating, err.Error()
		}
		return err
	}
	adopted := st.unprepared
	st.sandbox, st.unprepared = true, false
	w.sandboxStatus(ctx, pod, st)
	if n := st.network; n != nil && n.Network != "" && !adopted {
		// Which network and plugins the pod got: a file another package
		// drops into the CNI configuration directory changes it.
		w.logger.Info("pod attached to its network", "uid", uid, "network", n.Network, "cniConfig", n.Source, "plugins", strings.Join(n.Plugins, ","))
		w.a.events.Eventf(events.PodRef(pod), v1.EventTypeNormal, events.NetworkAttached, "Attached to CNI %s", podspec.NetworkConf{Network: n.Network, Source: n.Source, Plugins: n.Plugins})
	}
	if s := w.a.cfg.Seen; s != nil {
		// Best effort: without it, a restarted daemon says it saw the pod
		// later. Written while the pod's first container starts: nothing
		// of the start reads them, and their waits on the disk (two, for a
		// pod's first start) would come before its container could run.
		// apply joins it before it returns, so that nothing else the worker
		// does (a teardown removing the pod's directory) meets it.
		w.recording = s.RecordAsync(pod, w.gen.startTime, func(err error) {
			w.logger.Warn("cannot record when the pod was first seen", "uid", uid, "err", err)
		})
	}
	return nil
}

// holdUID registers pod's UID as held by this worker before its sandbox is
// made (Agent.waitForHeldUIDsLocked), if the worker still wants pod: under
// the agent's lock, so that a reconcile that gave the UID to a pod of
// another name meanwhile either saw the hold or sees this worker refuse.
func (w *worker) holdUID(pod *v1.Pod) bool {
	uid := string(pod.UID)
	if w.pods[uid] != nil {
		return true // held since its adoption or its first sandbox
	}
	w.a.mu.Lock()
	defer w.a.mu.Unlock()
	if w.desiredUID() != uid {
		return false
	}
	w.a.holdUIDLocked(uid, w.key)
	return true
}

// joinRecording waits for the records sandbox began writing, if any.
func (w *worker) joinRecording() {
	if w.recording != nil {
		<-w.recording
		w.recording = nil
	}
}

// start starts one container unless its back-off forbids it, and returns when to
// try again if it could not start. The pod is converted for the runtime once
// per start: the container's spec here, the sandbox's once per pod handed over.
func (w *worker) start(ctx context.Context, pod *v1.Pod, act action) time.Time {
	st := w.pods[act.podUID]
	c := findContainer(pod, act.container)
	ci := w.info(act.container)
	now := time.Now()
	key := backoffKey(act.podUID, act.container, w.gen.hashes[act.container])
	prev := st.instance(act.prevID)
	// The back-off runs from the last exit or failed start, whichever is newer.
	// A failed start already counted itself; an exit counts when it is restarted,
	// as in the kubelet's doBackOff.
	failedAt, exited := ci.failedAt, false
	if prev != nil && prev.FinishedAt.After(failedAt) {
		failedAt, exited = prev.FinishedAt, true
	}
	if until := w.inBackoff(pod, c, ci, key, failedAt, exited, now); !until.IsZero() {
		return until
	}
	spec, err := w.containerSpec(pod, c, act.attempt)
	if err != nil {
		ci.reason, ci.message = reasonConfigError, err.Error()
		w.a.events.Eventf(events.ContainerRef(pod, c.Name), v1.EventTypeWarning, events.Failed, "Error: %v", err)
		return time.Time{}
	}
	first := prev == nil && ci.last == nil && (ci.reason == "" || ci.reason == reasonCreating)
	req := images.Request{Pod: pod, Container: c, Image: spec.Image, First: first,
		Waiting: func(reason, message string) { ci.reason, ci.message = reason, message }, Publish: func() { w.publish(pod) },
		Secret: w.a.objects.Load().Secret}
	ensured, ok, retry := w.images.Ensure(ctx, req)
	if !ok {
		return retry
	}
	pulled := ensured.Pulled
	// The image made sure of is the one that runs, by its ID.
	spec.ImageID = ensured.ImageID
	w.orderStops(spec)
	cs, err := w.runContainer(ctx, pod, c, spec)
	if errors.Is(err, podspec.ErrImageRefused) {
		return w.images.Refused(req, err)
	}
	// A container whose process could not be started exists, exited with
	// StartError: it is handled as one that exited at once.
	startFailed := errors.Is(err, podspec.ErrStartFailed) && cs.ID != ""
	if errors.Is(err, podspec.ErrImageNotPresent) || (err != nil && !startFailed) {
		return w.startError(ctx, pod, c, ci, key, act.attempt, err)
	}
	// The kubelet records these around CreateContainer and StartContainer,
	// which StartContainer does at once.
	ref := events.ContainerRef(pod, c.Name)
	if !pulled {
		w.a.events.Eventf(ref, v1.EventTypeNormal, events.Pulled, "Container image %q already present on machine", c.Image)
	}
	w.a.events.Eventf(ref, v1.EventTypeNormal, events.Created, "Container created")
	w.a.events.Eventf(ref, v1.EventTypeNormal, events.Started, "Container started")
	// The exit counts in the back-off once the container really is restarted
	// (the kubelet's doBackOff), not each time a missing image sends it back to
	// wait, which doubled the delay on every retry; a failed start counts itself.
	if exited {
		w.backoff.next(key, failedAt)
	}
	w.started(ctx, pod, c, ci, st, spec, cs, err, now)
	if prev != nil {
		w.replaced(ctx, pod, c, ci, *prev)
	}
	return time.Time{}
}

// instance is the container of st with ID id, if id is one.
func (st *podState) instance(id string) *podspec.ContainerStatus {
	for i := range st.containers {
		if st.containers[i].ID == id && id != "" {
			p := st.containers[i]
			return &p
		}
	}
	return nil
}

// inBackoff returns when container c, which failed at failedAt (exited:
// its instance exited then, rather than failed to start), may start again;
// zero: now. One that exited waits CrashLoopBackOff meanwhile.
func (w *worker) inBackoff(pod *v1.Pod, c *v1.Container, ci *ctrInfo, key string, failedAt time.Time, exited bool, now time.Time) time.Time {
	if failedAt.IsZero() {
		return time.Time{}
	}
	until, d := w.backoff.wait(key, failedAt, now)
	if !until.IsZero() && exited {
		ci.reason = reasonCrashLoop
		ci.message = fmt.Sprintf("back-off %s restarting failed container=%s pod=%s", d, c.Name, formatPod(pod))
		// The kubelet's doBackOff, at each sync that finds it waiting.
		w.a.events.Eventf(events.ContainerRef(pod, c.Name), v1.EventTypeWarning, events.BackOff,
			"Back-off restarting failed container %s in pod %s", c.Name, formatPod(pod))
	}
	return until
}

// containerSpec converts container c of pod for the runtime, with the pod's
// addresses: status.podIP(s) and status.hostIP(s) in env are the pod's (the
// kubelet's makeEnvironmentVariables takes them from the sandbox).
func (w *worker) containerSpec(pod *v1.Pod, c *v1.Container, attempt int) (*podspec.Container, error) {
	withIPs := *pod
	withIPs.Status = v1.PodStatus{}
	if st := w.pods[string(pod.UID)]; st != nil {
		w.addresses(pod, st, &withIPs.Status)
	}
	return w.a.conv.Container(&withIPs, c, attempt)
}

// sandboxSpec is the runtime's view of the desired pod's sandbox, converted
// once per pod the worker is handed: a pod is never changed once handed
// over, so its sandbox creation and every start share one.
func (w *worker) sandboxSpec(pod *v1.Pod) *podspec.Pod {
	if w.gen.sandboxOf != pod {
		w.gen.sandboxOf, w.gen.sandbox = pod, w.a.conv.Sandbox(pod)
	}
	return w.gen.sandbox
}

// runContainer has the runtime start container c as spec says. A container
// with a postStart hook is marked first: a daemon that dies at any point
// after leaves the hook to run again; the mark goes if nothing started.
func (w *worker) runContainer(ctx context.Context, pod *v1.Pod, c *v1.Container, spec *podspec.Container) (podspec.ContainerStatus, error) {
	uid := string(pod.UID)
	marked := false
	if lifecycle.HasPostStart(c) {
		if err := w.a.marks.Mark(uid, c.Name, spec.Attempt); err != nil {
			w.logger.Warn("cannot mark postStart hook; a daemon restart during it would take it as done", "container", c.Name, "err", err)
		}
		marked = true
	}
	cs, err := w.a.rt.StartContainer(ctx, w.sandboxSpec(pod), spec)
	if marked && (err != nil || cs.ID == "") {
		if err := w.a.marks.Clear(uid, c.Name, spec.Attempt); err != nil {
			w.logger.Warn("cannot clear postStart mark", "container", c.Name, "err", err)
		}
	}
	return cs, err
}

// startError takes a start that left no container, and returns when to try
// again: a missing image waits for Resync and every SyncFrequency, without
// back-off; any other failure counts in the back-off.
func (w *worker) startError(ctx context.Context, pod *v1.Pod, c *v1.Container, ci *ctrInfo, key string, attempt int, err error) time.Time {
	ref := events.ContainerRef(pod, c.Name)
	if errors.Is(err, podspec.ErrImageNotPresent) {
		ci.reason = reasonImageNeverPull
		ci.message = w.imageMissing(c)
		// The kubelet's image manager, then its startContainer.
		w.a.events.Eventf(ref, v1.EventTypeWarning, events.ErrImageNeverPull, "%s", ci.message)
		w.a.events.Eventf(ref, v1.EventTypeWarning, events.Failed, "Error: %s", reasonImageNeverPull)
		return time.Time{}
	}
	if ctx.Err() != nil {
		return time.Time{}
	}
	// The reasons of kuberuntime startContainer for a failed
	// generateContainerConfig, CreateContainer and StartContainer.
	ci.reason, ci.message = reasonCreateError, err.Error()
	switch {
	case errors.Is(err, podspec.ErrContainerConfig):
		ci.reason = reasonConfigError
	case errors.Is(err, podspec.ErrStartFailed):
		ci.reason = reasonRunError
	}
	ci.failedAt = time.Now()
	w.backoff.next(key, ci.failedAt)
	w.logger.Warn("container start failed", "container", c.Name, "attempt", attempt, "err", err)
	w.a.events.Eventf(ref, v1.EventTypeWarning, events.Failed, "Error: %v", err)
	until, _ := w.backoff.wait(key, ci.failedAt, ci.failedAt)
	return until
}

// started records container c, made as cs at now: running, or exited at
// once with StartError (err), and watches it; a running one gets its
// postStart hook.
func (w *worker) started(ctx context.Context, pod *v1.Pod, c *v1.Container, ci *ctrInfo, st *podState, spec *podspec.Container, cs podspec.ContainerStatus, err error, now time.Time) {
	startFailed := err != nil
	labels := podspec.ContainerStatus{
		PodUID: st.uid, PodName: pod.Name, Name: c.Name, Attempt: spec.Attempt,
		Hash: spec.Hash, Image: spec.Image, StartedAt: now, CreatedAt: now,
	}
	if startFailed {
		labels.StartedAt = time.Time{} // it never started
	}
	keepLabels(&cs, labels)
	if cs.State == "" {
		cs.State = podspec.StateRunning
	}
	st.containers = append(st.containers, cs)
	ci.reason, ci.message, ci.failedAt = "", "", time.Time{}
	if startFailed {
		w.logger.Warn("container start failed", "container", c.Name, "id", cs.ID, "attempt", cs.Attempt, "err", err)
		// Until it is restarted (or in back-off), it waits with the kubelet's
		// reason for a failed StartContainer; one that will not be restarted
		// shows as terminated (kubelet convertToAPIContainerStatuses).
		if shouldRestart(c, pod.Spec.RestartPolicy, cs.ExitCode) {
			ci.reason, ci.message = reasonRunError, cs.Message
		}
	} else {
		w.logger.Info("container started", "container", c.Name, "id", cs.ID, "attempt", cs.Attempt)
		if lifecycle.HasPostStart(c) {
			w.runPostStart(ctx, pod, c, cs)
		}
	}
	// An exited one is reported at once, so the worker syncs again.
	w.watch(ctx, cs.ID)
}

// replaced removes prev, the instance of container c a start replaced, and
// prunes the logs before it: those of this run and the one before stay, for
// logs --previous.
func (w *worker) replaced(ctx context.Context, pod *v1.Pod, c *v1.Container, ci *ctrInfo, prev podspec.ContainerStatus) {
	ci.last = &prev
	w.storeLast()
	if err := w.destroy(ctx, string(pod.UID), prev.ID); err != nil {
		// Kept in state: the next plan tries again.
		w.logger.Warn("remove previous container failed", "container", prev.ID, "err", err)
	}
	if err := w.a.conv.PruneLogs(pod, c.Name, prev.Attempt); err != nil {
		w.logger.Warn("prune old logs failed", "container", c.Name, "err", err)
	}
}

// imageMissing is the message of a container whose image is not in the store:
// the kubelet's for pull policy Never, with the container's own policy (when
// nothing pulls, every policy ends there), and how to bring the image in.
func (w *worker) imageMissing(c *v1.Container) string {
	policy := c.ImagePullPolicy
	if policy == "" {
		policy = v1.PullIfNotPresent
	}
	root := w.a.cfg.Paths.RootDir
	if root == "" {
		root = config.DefaultRootDir
	}
	cmd := "staticpodd images import FILE"
	if root != config.DefaultRootDir {
		cmd = "staticpodd images import --root-dir " + root + " FILE"
	}
	if w.a.cfg.Images != nil {
		// The kubelet's imageNotPresentOnNeverPolicyError, and how to bring it in.
		return fmt.Sprintf("Container image %q is not present with pull policy of %s: pull it with `staticpodd images pull %s`, "+
			"import it with `%s`, or copy the image archive into %s/", c.Image, policy, c.Image, cmd, filepath.Join(root, "images", "import"))
	}
	return fmt.Sprintf("Container image %q is not present with pull policy of %s, and staticpodd does not pull images: "+
		"import it with `%s`, or copy the image archive into %s/", c.Image, policy, cmd, filepath.Join(root, "images", "import"))
}

// formatPod names a pod as the kubelet's format.Pod does: name_namespace(uid).
func formatPod(pod *v1.Pod) string {
	return fmt.Sprintf("%s_%s(%s)", pod.Name, pod.Namespace, pod.UID)
}

// sandboxStatus learns st's place on the pod network: its pod IPs, or why
// it has none (logged by the runtime, shown in the pod's status). It asks
// at every sync (the runtime answers from memory), so that what the
// runtime learns later (an adopted network's failed check) shows too, and
// warns, once for each change, when a pod made now would get another
// network than pod's.
func (w *worker) sandboxStatus(ctx context.Context, pod *v1.Pod, st *podState) {
	if !st.sandbox {
		return
	}
	ns, err := w.a.rt.SandboxStatus(ctx, st.uid)
	if err != nil {
		w.logger.Warn("cannot read the pod's network status", "uid", st.uid, "err", err)
		return
	}
	prev := st.network
	st.network = &ns
	if ns.Chosen == nil || (prev != nil && prev.Chosen != nil && prev.Chosen.String() == ns.Chosen.String()) {
		return
	}
	has := podspec.NetworkConf{Network: ns.Network, Source: ns.Source, Plugins: ns.Plugins, Why: ns.Message}
	w.logger.Warn("the CNI configuration changed under a running pod: it keeps its network until it is made again",
		"uid", st.uid, "network", has.String(), "now", ns.Chosen.String())
	w.a.events.Eventf(events.PodRef(pod), v1.EventTypeWarning, events.NetworkConfigChanged,
		"The CNI configuration changed: the pod keeps %s until it is made again; a pod made now gets %s", has, ns.Chosen)
}
