package agent

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/flowcontrol"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// worker owns every pod UID that had one full name: the desired generation and
// the older ones it must remove first, so two generations never run at once. It
// runs in its own goroutine; updates go through a one-slot mailbox where the
// newest desired pod wins (kubelet pod_workers.go).
type worker struct {
	key    string
	a      *Agent
	logger *slog.Logger
	wake   chan struct{}
	exits  chan podspec.ContainerStatus

	mu      sync.Mutex // guards desired, seq, evict, health
	desired *v1.Pod    // nil: remove everything
	seq     uint64     // the dispatch that set desired
	// evict, when set, stops the pod of UID evictUID and keeps it stopped
	// until it is withdrawn (nil): the eviction manager's input.
	evict    *stopRequest
	evictUID string
	// pruned, when set, is closed once a sync removed the exited
	// containers of the stopped pod (node-level reclaim).
	pruned chan struct{}
	health map[string]*health // by container ID, what its probes said

	// Owned by the worker goroutine.
	pods     map[string]*podState // by UID
	watching map[string]bool      // container IDs with a Wait goroutine
	probes   map[string]*probing  // container IDs whose probes run
	// postStarts are the postStart hooks that run, by container ID, and
	// hookChecked the containers whose postStart mark was looked for.
	postStarts  map[string]*hookRun
	hookChecked map[string]bool
	hookDone    chan hookResult
	backoff     *backoff
	// pullBackoff is the image pull back-off, by pod UID and image;
	// pullErrs the last failed pull of each key it has an entry for.
	pullBackoff *flowcontrol.Backoff
	pullErrs    map[string]pullFailure
	gen         *generation // per-container state of the desired UID
	timer       *time.Timer
	prevState   *v1.PodStatus
}

// generation is what the worker remembers about the desired UID beyond what the
// runtime reports: why containers wait, what they ran before.
type generation struct {
	uid    string
	policy v1.RestartPolicy
	// stop is why the pod is stopped and kept stopped: past its deadline
	// (for good) or evicted (until the agent lifts it).
	stop *stopRequest
	// discard are the containers of the run an eviction ended, removed
	// before the pod starts again.
	discard map[string]bool
	// final is the last status of each container of a stopped pod, shown
	// once the containers are removed (an evicted pod releases them).
	final     map[string]podspec.ContainerStatus
	hashes    map[string]string
	convErr   map[string]error
	ctrs      map[string]*ctrInfo
	startTime time.Time
}

type ctrInfo struct {
	reason, message string                   // why the container waits, when it does
	last            *podspec.ContainerStatus // the instance before the current one
	failedAt        time.Time                // last start that failed, for back-off
}

func newWorker(a *Agent, key string, pods map[string]*podState) *worker {
	return &worker{
		key:         key,
		a:           a,
		logger:      a.logger.With("pod", key),
		wake:        make(chan struct{}, 1),
		exits:       make(chan podspec.ContainerStatus),
		pods:        pods,
		watching:    map[string]bool{},
		probes:      map[string]*probing{},
		health:      map[string]*health{},
		backoff:     newBackoff(backoffInitial, a.cfg.BackoffMax),
		pullBackoff: flowcontrol.NewBackOff(pullBackoffInitial, pullBackoffMax),
		pullErrs:    map[string]pullFailure{},

		postStarts:  map[string]*hookRun{},
		hookChecked: map[string]bool{},
		hookDone:    make(chan hookResult),
	}
}

// update hands the worker a new desired pod (nil: remove it); the newest wins.
func (w *worker) update(pod *v1.Pod, seq uint64) {
	w.mu.Lock()
	w.desired, w.seq = pod, seq
	w.mu.Unlock()
	w.nudge()
}

// nudge makes the worker sync soon; it never blocks.
func (w *worker) nudge() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// setEviction stops the pod of uid for req and keeps it stopped; nil lifts
// the eviction, and the pod starts afresh.
func (w *worker) setEviction(uid string, req *stopRequest) {
	w.mu.Lock()
	w.evict, w.evictUID = req, uid
	w.mu.Unlock()
	w.nudge()
}

// pruneDead asks the worker to remove the exited containers of its pod if
// it is stopped (evicted, past its deadline); the channel is closed once the
// worker synced.
func (w *worker) pruneDead() <-chan struct{} {
	w.mu.Lock()
	if w.pruned == nil {
		w.pruned = make(chan struct{})
	}
	ch := w.pruned
	w.mu.Unlock()
	w.nudge()
	return ch
}

func (w *worker) desiredUID() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.desired == nil {
		return ""
	}
	return string(w.desired.UID)
}

func (w *worker) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for _, st := range w.pods {
		for _, c := range st.containers {
			if c.State != podspec.StateExited {
				w.watch(ctx, c.ID)
			}
		}
	}
	for {
		op, start := w.syncOperation(), time.Now()
		onFreshStack(func() { w.sync(ctx) })
		w.a.timings.worker(op).Observe(time.Since(start).Seconds())
		if len(w.pods) == 0 && w.a.removeWorker(w) {
			w.a.summaryChanged() // the pod is no longer listed
			return
		}
		var timerC <-chan time.Time
		if w.timer != nil {
			timerC = w.timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
		case st := <-w.exits:
			onFreshStack(func() {
				if c, exited := w.record(st); exited {
					w.exited(c)
				}
			})
		case r := <-w.hookDone:
			onFreshStack(func() { w.postStartDone(r) })
		case <-timerC:
			w.timer = nil
		}
	}
}

// onFreshStack runs f on a goroutine of its own and waits for it to return.
// A worker lives as long as its pod, parked in run's select; the stack that
// a start or a stop grows would stay with it, since the runtime shrinks a
// parked goroutine's stack only now and then, by half, and not below twice
// what it uses. With 100 pods at rest the runtime counted 4.5-5.7 MiB of
// goroutine stacks before, 3.3-4.0 MiB this way. f's stack goes with its
// goroutine; starting one costs about a microsecond per sync.
func onFreshStack(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

// sync plans the desired pod against what the worker knows and applies the plan.
func (w *worker) sync(ctx context.Context) {
	w.mu.Lock()
	pod, seq, evict, pruned := w.desired, w.seq, w.evict, w.pruned
	w.pruned = nil
	if pod == nil || string(pod.UID) != w.evictUID {
		evict = nil
	}
	w.mu.Unlock()
	if pruned != nil {
		defer close(pruned)
	}

	var d *desiredPod
	var deadline time.Time
	if pod != nil {
		d = w.resolve(pod)
		if w.lifecycle(pod, evict) {
			d = w.resolve(pod)
		}
		deadline = w.checkDeadline(d)
		d.stop, d.discard = w.gen.stop, w.gen.discard
		d.pruneDead = pruned != nil
		if d.stop != nil || d.pruneDead {
			w.keepFinal(string(pod.UID))
		}
		d.final = w.gen.final
		if st := w.pods[string(pod.UID)]; st != nil {
			st.grace = podGrace(pod)
			if st.sandbox {
				// The kubelet's volume manager remounts on every sync: a
				// downwardAPI volume follows edited labels and annotations.
				if err := w.a.conv.RefreshVolumes(pod); err != nil {
					w.logger.Warn("cannot refresh the pod's volumes", "uid", pod.UID, "err", err)
				}
			}
		}
	}
	// Before the first publish: an adopted container whose postStart hook
	// runs again is never shown started meanwhile.
	w.syncPostStarts(ctx, pod)
	// A new generation shows at once, waiting while an older one stops, and
	// a pod no longer desired shows Terminating until nothing of it is left.
	w.publish(pod)
	w.syncProbes(ctx, pod)
	w.markProbes(pod)
	w.markHooks()
	retry := w.apply(ctx, pod, plan(d, w.pods))
	if ctx.Err() != nil {
		return
	}
	if d != nil && d.pruneDead && w.pods[string(pod.UID)] != nil && len(w.pods[string(pod.UID)].containers) == 0 {
		// The logs of the dead containers go with them (the kubelet's
		// container GC removes a removed container's logs).
		for _, c := range manifest.AllContainers(pod) {
			if err := w.a.conv.PruneLogs(pod, c.Name, math.MaxInt); err != nil {
				w.logger.Warn("remove logs of a stopped pod failed", "container", c.Name, "err", err)
			}
		}
	}
	w.syncProbes(ctx, pod)
	if !deadline.IsZero() && (retry.IsZero() || deadline.Before(retry)) {
		retry = deadline
	}
	w.setTimer(retry)
	w.publish(pod)
	w.a.synced(w.key, seq)
}

// resolve returns pod with the hash of each container, computed once per UID.
func (w *worker) resolve(pod *v1.Pod) *desiredPod {
	if w.gen == nil || w.gen.uid != string(pod.UID) {
		if w.gen != nil {
			w.forgetBackoff(w.gen.uid)
		}
		w.gen = &generation{
			uid:       string(pod.UID),
			policy:    pod.Spec.RestartPolicy,
			hashes:    map[string]string{},
			convErr:   map[string]error{},
			ctrs:      map[string]*ctrInfo{},
			startTime: time.Now(),
		}
		if st := w.pods[w.gen.uid]; st != nil {
			w.gen.startTime = adoptedStart(st, w.gen.startTime)
		}
		// The kubelet's startTime is when it first took the pod on: kept
		// across daemon restarts, which a pod whose containers were all
		// replaced since (a crash loop) could not tell otherwise.
		if w.a.cfg.Seen != nil {
			w.gen.startTime = w.a.cfg.Seen.Started(w.gen.uid, w.gen.startTime)
		}
		for _, c := range manifest.AllContainers(pod) {
			spec, err := w.a.conv.Container(pod, c, 0)
			if err != nil {
				w.gen.convErr[c.Name] = err
				w.a.events.Eventf(events.ContainerRef(pod, c.Name), v1.EventTypeWarning, events.Failed, "Error: %v", err)
				continue
			}
			w.gen.hashes[c.Name] = spec.Hash
		}
	}
	return &desiredPod{pod: pod, hashes: w.gen.hashes}
}

// lifecycle takes the eviction the worker was given: it makes a syncing pod
// terminating, with the eviction's reason and grace; an eviction lifted makes
// the pod start afresh, as a new generation whose old containers are
// discarded (the kubelet would see a new pod). It reports whether the
// generation was reset.
func (w *worker) lifecycle(pod *v1.Pod, evict *stopRequest) bool {
	switch {
	case evict != nil && w.gen.stop == nil:
		w.gen.stop = evict
		w.logger.Info("evicting pod", "reason", evict.reason, "message", evict.message, "grace", evict.grace)
		w.a.events.Eventf(events.PodRef(pod), v1.EventTypeWarning, reasonEvicted, "%s", evict.message)
	case evict == nil && w.gen.stop != nil && w.gen.stop.reason == reasonEvicted:
		discard := map[string]bool{}
		if st := w.pods[w.gen.uid]; st != nil {
			for _, c := range st.containers {
				discard[c.ID] = true
			}
		}
		w.logger.Info("eviction lifted, starting pod again")
		w.forgetBackoff(w.gen.uid)
		w.gen = nil
		w.resolve(pod)
		w.gen.startTime = time.Now()
		w.gen.discard = discard
		return true
	}
	return false
}

// keepFinal remembers the newest instance of each container of the stopped
// pod uid, for its status once the containers are gone.
func (w *worker) keepFinal(uid string) {
	st := w.pods[uid]
	if st == nil {
		return
	}
	if w.gen.final == nil {
		w.gen.final = map[string]podspec.ContainerStatus{}
	}
	for name, c := range latestByName(st.containers) {
		if c.State == podspec.StateExited {
			w.gen.final[name] = c
		}
	}
}

// adoptedStart is the start time of an adopted pod: its first container's.
func adoptedStart(st *podState, now time.Time) time.Time {
	t := now
	for _, c := range st.containers {
		if !c.CreatedAt.IsZero() && c.CreatedAt.Before(t) {
			t = c.CreatedAt
		}
		if !c.StartedAt.IsZero() && c.StartedAt.Before(t) {
			t = c.StartedAt
		}
	}
	return t
}

func (w *worker) info(name string) *ctrInfo {
	ci := w.gen.ctrs[name]
	if ci == nil {
		ci = &ctrInfo{}
		w.gen.ctrs[name] = ci
	}
	return ci
}

func (w *worker) setTimer(at time.Time) {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	if !at.IsZero() {
		w.timer = time.NewTimer(time.Until(at))
	}
}

// watch starts a goroutine that reports the container's exit to the worker.
func (w *worker) watch(ctx context.Context, id string) {
	if w.watching[id] {
		return
	}
	w.watching[id] = true
	go func() {
		st, err := w.waitExit(ctx, id)
		if err != nil {
			return
		}
		select {
		case w.exits <- st:
		case <-ctx.Done():
		}
	}()
}

// waitExit waits for a container to exit, retrying a failing Wait every 10s. A
// container that vanished is reported exited as the kubelet does
// (ContainerStatusUnknown, 137), so its pod worker can go on.
func (w *worker) waitExit(ctx context.Context, id string) (podspec.ContainerStatus, error) {
	for {
		st, err := w.a.rt.Wait(ctx, id)
		switch {
		case err == nil:
			if st.ID == "" {
				st.ID = id
			}
			return st, nil
		case ctx.Err() != nil:
			return st, ctx.Err()
		case errors.Is(err, podspec.ErrNotExist):
			return podspec.ContainerStatus{ID: id, State: podspec.StateExited, ExitCode: 137,
				Reason: "ContainerStatusUnknown", Message: "The container could not be located", FinishedAt: time.Now()}, nil
		}
		w.logger.Warn("wait for container failed, retrying", "container", id, "err", err)
		t := time.NewTimer(backoffInitial)
		select {
		case <-ctx.Done():
			t.Stop()
			return podspec.ContainerStatus{}, ctx.Err()
		case <-t.C:
		}
	}
}

// record takes a new runtime status for a container the worker knows, and
// returns it with what was known before, and whether it has exited now.
func (w *worker) record(st podspec.ContainerStatus) (podspec.ContainerStatus, bool) {
	for _, ps := range w.pods {
		for i := range ps.containers {
			c := &ps.containers[i]
			if c.ID != st.ID {
				continue
			}
			was := c.State
			merged := st
			keepLabels(&merged, *c)
			*c = merged
			if merged.State == podspec.StateExited {
				delete(w.watching, c.ID)
				// Nothing left to run it in: it exited, and restarts (or
				// not) as any exited container.
				w.cancelPostStart(c.ID)
			}
			return merged, was != podspec.StateExited && merged.State == podspec.StateExited
		}
	}
	return st, false
}

// keepLabels fills what a runtime status left empty from what was known before.
func keepLabels(st *podspec.ContainerStatus, old podspec.ContainerStatus) {
	if st.PodUID == "" {
		st.PodUID = old.PodUID
	}
	if st.PodName == "" {
		st.PodName = old.PodName
	}
	if st.Name == "" {
		st.Name = old.Name
	}
	if st.Hash == "" {
		st.Hash = old.Hash
	}
	if st.Attempt == 0 {
		st.Attempt = old.Attempt
	}
	if st.Image == "" {
		st.Image = old.Image
	}
	if st.ImageID == "" {
		st.ImageID, st.ImageRef = old.ImageID, old.ImageRef
	}
	if st.StartedAt.IsZero() {
		st.StartedAt = old.StartedAt
	}
	if st.CreatedAt.IsZero() {
		st.CreatedAt = old.CreatedAt
	}
	if st.StopSignal == 0 {
		st.StopSignal = old.StopSignal
	}
	if st.Annotations == nil {
		st.Annotations = old.Annotations
	}
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, c := range manifest.AllContainers(pod) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// forgetBackoff drops the restart and pull back-offs of a pod.
func (w *worker) forgetBackoff(uid string) {
	w.backoff.forget(uid)
	for k := range w.pullErrs {
		if len(k) > len(uid) && k[:len(uid)+1] == uid+"_" {
			w.forgetPull(k)
		}
	}
}
