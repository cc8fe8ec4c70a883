package agent

import (
	"context"
	"log/slog"
	"math"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/images"
	"github.com/staticpodd/staticpodd/agent/lifecycle"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/prober"
	"github.com/staticpodd/staticpodd/agent/status"
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
	exits  chan *podspec.ContainerStatus // a pointer: park receives it with a small frame

	mu  sync.Mutex // guards box, kills and cuts
	box mailbox
	// kills are the clocks of the kills that run, which a stop with a
	// shorter grace period brings forward; cuts is, by pod UID, when such
	// a stop wants every kill of the pod over, for the kills to come.
	kills map[*killClock]struct{}
	cuts  map[string]time.Time

	// Owned by the worker goroutine.
	pods     map[string]*podState // by UID
	watching map[string]bool      // container IDs whose exit is watched
	// waiters are the Wait goroutines of watch: run cancels and joins them
	// before it returns.
	waiters   sync.WaitGroup
	probes    *prober.Manager       // the probes of its running containers, and their results
	hooks     *lifecycle.PostStarts // the postStart hooks that run
	backoff   *backoff
	images    *images.Manager // pulls, with their back-off per pod and image
	gen       *generation     // per-container state of the desired UID
	timer     *time.Timer
	prevState *v1.PodStatus
	// statusCache is what the status published last was made of: a resync
	// that changed none of it publishes the same pod again.
	statusCache *statusCache
	// shownReady is whether the pod last published was Ready: the pods
	// that start after it are nudged when it changes (readinessShown).
	shownReady bool
	// kept is what keepConditions last wrote, of the pod of UID uid.
	kept struct {
		uid   string
		conds []v1.PodCondition
	}
	// recording, while not nil, is closed once the pod's records that
	// sandbox began writing are written (SeenStore.RecordAsync); apply
	// waits for it before it returns.
	recording <-chan struct{}
}

// mailbox is what the Agent last told a worker; a sync takes it (takeMail).
// The newest desired pod wins: one that was never synced is simply replaced.
type mailbox struct {
	desired *v1.Pod // nil: remove everything
	seq     uint64  // the dispatch that set desired
	// evict, when set, stops the pod of UID evictUID and keeps it stopped
	// until it is withdrawn (nil): the eviction manager's input.
	evict    *stopRequest
	evictUID string
	// reclaim, when set, is node-level reclaim's request for the next
	// sync, closed once that sync removed the exited containers of a pod
	// that will not run them again.
	reclaim chan struct{}
	// recreate is the UID whose manifest was removed and written again
	// since the last sync: that pod stops, then starts again.
	recreate string
}

type ctrInfo struct {
	reason, message string                   // why the container waits, when it does
	last            *podspec.ContainerStatus // the instance before the current one
	failedAt        time.Time                // last start that failed, for back-off
}

func newWorker(a *Agent, key string, pods map[string]*podState) *worker {
	logger := a.logger.With("pod", key)
	w := &worker{
		key:      key,
		a:        a,
		logger:   logger,
		wake:     make(chan struct{}, 1),
		exits:    make(chan *podspec.ContainerStatus),
		pods:     pods,
		watching: map[string]bool{},
		backoff:  newBackoff(backoffInitial, a.cfg.BackoffMax),
		images:   images.NewManager(a.cfg.Images, a.events, a.nextResync, logger),
		hooks:    lifecycle.NewPostStarts(a.marks, logger),
	}
	w.probes = newProbes(w)
	return w
}

// update hands the worker a new desired pod (nil: remove it); the newest wins.
func (w *worker) update(pod *v1.Pod, seq uint64) {
	w.mu.Lock()
	w.box.desired, w.box.seq = pod, seq
	w.mu.Unlock()
	w.nudge()
}

// recreate says the manifest of the pod uid was removed and written again:
// the pod stops and starts again, as the kubelet's pod worker does for a
// REMOVE then ADD of one UID (restartRequested).
func (w *worker) recreate(uid string) {
	w.mu.Lock()
	w.box.recreate = uid
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
// the eviction, and the pod starts afresh. A kill of the pod already running
// with a longer grace period ends within req's.
func (w *worker) setEviction(uid string, req *stopRequest) {
	w.mu.Lock()
	if req == nil && w.box.evict != nil && w.box.evict.reason != reasonEvicted {
		// A stop through the CRI replaced the eviction (of the pod's
		// earlier UID): it ends with its own lift.
		w.mu.Unlock()
		return
	}
	if req == nil {
		w.forgetCutLocked(w.box.evictUID)
	}
	w.box.evict, w.box.evictUID = req, uid
	w.cutKillsLocked(uid, req)
	w.mu.Unlock()
	w.nudge()
}

// reclaim asks the worker to remove the exited containers of its pod if it
// will not run them again (past its deadline, finished for good: planReclaim);
// the channel is closed once the worker synced.
func (w *worker) reclaim() <-chan struct{} {
	w.mu.Lock()
	if w.box.reclaim == nil {
		w.box.reclaim = make(chan struct{})
	}
	ch := w.box.reclaim
	w.mu.Unlock()
	w.nudge()
	return ch
}

// seed sets what a worker not yet running starts from: the pod it is to
// run (nil: it stops the adopted pods it owns, which the status manager
// lists Terminating meanwhile) and, for a pod the eviction manager refused,
// the eviction that holds it.
func (w *worker) seed(desired *v1.Pod, seq uint64, refused *stopRequest) {
	w.mu.Lock()
	w.box.desired, w.box.seq = desired, seq
	if refused != nil {
		w.box.evict, w.box.evictUID = refused, string(desired.UID)
	}
	w.mu.Unlock()
	if desired == nil {
		w.a.statuses.Update(w.key, func(published *v1.Pod, stopping map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod) {
			for uid, st := range w.pods {
				if p := orphanPod(uid, st); p != nil {
					stopping[uid] = p
				}
			}
			return published, stopping
		})
	}
}

// wanted is the pod the worker is to run; nil: none. Desired pods are
// never changed once handed over, so it may be read without the lock.
func (w *worker) wanted() *v1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.box.desired
}

func (w *worker) desiredUID() string {
	if p := w.wanted(); p != nil {
		return string(p.UID)
	}
	return ""
}

// activePod is the desired pod unless its published status is terminal:
// nothing of it runs then (the kubelet's activePods).
func (w *worker) activePod() *v1.Pod {
	pod, status := w.wanted(), w.a.statuses.Desired(w.key)
	if pod != nil && status != nil && status.UID == pod.UID &&
		(status.Status.Phase == v1.PodSucceeded || status.Status.Phase == v1.PodFailed) {
		return nil
	}
	return pod
}

// publishedUID is the UID of the pod last published; "" if none is.
func (w *worker) publishedUID() string {
	if p := w.a.statuses.Desired(w.key); p != nil {
		return string(p.UID)
	}
	return ""
}

func (w *worker) run(ctx context.Context) {
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		// Everything the worker runs beside its syncs ends with ctx and is
		// joined: the probes, the postStart hooks and the waits for exits.
		cancel()
		w.probes.Stop()
		w.hooks.Stop()
		w.waiters.Wait()
	}()
	w.watchAdopted(ctx)
	for w.step(ctx) {
	}
}

// watchAdopted watches the exit of each container the worker was given
// that has not exited.
//
//go:noinline
func (w *worker) watchAdopted(ctx context.Context) {
	for _, st := range w.pods {
		for _, c := range st.containers {
			if c.State != podspec.StateExited {
				w.watch(ctx, c.ID)
			}
		}
	}
}

// step syncs, then waits for what comes next and handles it; false: the
// worker is done. The sync and what follows the wait run on stacks of
// their own (onFreshStack), and the wait itself in park, whose frame is
// small: a worker lives as long as its pod, parked there, and the runtime
// shrinks a parked stack only to four times what it uses. With run's frame
// of 1.2 KiB under the select, each worker kept an 8 KiB stack at rest;
// parked through park it uses less than 2 KiB, and the stack shrinks to 4.
//
//go:noinline
func (w *worker) step(ctx context.Context) bool {
	op, start := w.syncOperation(), time.Now()
	onFreshStack(func() { w.sync(ctx) })
	w.a.timings.worker(op).Observe(time.Since(start).Seconds())
	if len(w.pods) == 0 && w.a.removeWorker(w) {
		w.a.summaryChanged() // the pod is no longer listed
		return false
	}
	var timerC <-chan time.Time
	if w.timer != nil {
		timerC = w.timer.C
	}
	switch ev := w.park(ctx, timerC); ev.kind {
	case wokeDone:
		return false
	case wokeExit:
		onFreshStack(func() {
			if c, exited := w.record(*ev.exit); exited {
				w.exited(c)
			}
		})
	case wokeHook:
		onFreshStack(func() { w.postStartDone(*ev.hook) })
	case wokeTimer:
		w.timer = nil
	}
	return true
}

// What woke a parked worker.
const (
	wokeNudge = iota
	wokeDone
	wokeExit
	wokeHook
	wokeTimer
)

// wakeup is what woke a parked worker, and what it received: an exit or a
// postStart hook's end, on the heap so that park's frame stays small.
type wakeup struct {
	kind int
	exit *podspec.ContainerStatus
	hook *lifecycle.PostStartResult
}

// park waits for the worker's next event (step).
//
//go:noinline
func (w *worker) park(ctx context.Context, timerC <-chan time.Time) wakeup {
	select {
	case <-ctx.Done():
		return wakeup{kind: wokeDone}
	case <-w.wake:
		return wakeup{kind: wokeNudge}
	case st := <-w.exits:
		return wakeup{kind: wokeExit, exit: st}
	case r := <-w.hooks.Done():
		return wakeup{kind: wokeHook, hook: &r}
	case <-timerC:
		return wakeup{kind: wokeTimer}
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

// mail is what the worker was told since its last sync.
type mail struct {
	pod *v1.Pod // the newest desired pod; nil: remove everything
	seq uint64  // the dispatch that set pod
	// evict is the eviction in force for pod, if any.
	evict *stopRequest
	// reclaimed, when set, is closed once the sync is done: node-level
	// reclaim asked the pod to remove its exited containers.
	reclaimed chan struct{}
	// recreate: pod's manifest was removed and written again.
	recreate bool
}

// takeMail reads the mailbox for a sync: the desired pod and the eviction
// stay until replaced, a reclaim is taken.
func (w *worker) takeMail() mail {
	w.mu.Lock()
	defer w.mu.Unlock()
	m := mail{pod: w.box.desired, seq: w.box.seq, evict: w.box.evict, reclaimed: w.box.reclaim}
	m.recreate = m.pod != nil && string(m.pod.UID) == w.box.recreate
	w.box.reclaim, w.box.recreate = nil, ""
	if m.pod == nil || string(m.pod.UID) != w.box.evictUID {
		m.evict = nil
	}
	if m.pod != nil && m.evict == nil {
		// Desired, and no stop holds it (a manifest written back, an edit
		// undone): a cut of the pod while it was not is over. Here rather
		// than in update: a removal already under way finishes with its cut,
		// and a cut that came after the update (a StopPod racing it) goes
		// before any later kill, each of which is in a sync.
		w.forgetCutLocked(string(m.pod.UID))
	}
	return m
}

// sync takes the worker's mail, moves the desired generation through its
// states, and syncs it in the one it is in; older generations are stopped
// and removed first.
func (w *worker) sync(ctx context.Context) {
	m := w.takeMail()
	if m.reclaimed != nil {
		defer close(m.reclaimed)
	}
	pod := m.pod
	var d *desiredPod
	var deadline time.Time
	if pod != nil {
		d, deadline = w.advance(m)
		w.refreshVolumes(pod)
	}
	w.beforeApply(ctx, pod)
	var retry time.Time
	switch {
	case d == nil:
		// Nothing is desired: every generation the worker has goes, in
		// its turn among the pods stopping with it.
		if retry = w.stopTurn(); !retry.IsZero() {
			break
		}
		w.rememberAttempts()
		retry = w.apply(ctx, nil, plan(nil, w.pods))
	case d.state == podSyncing:
		retry = w.syncPod(ctx, d)
	case d.state == podTerminating:
		retry = w.syncTerminatingPod(ctx, d)
	default:
		retry = w.syncTerminatedPod(ctx, d)
	}
	if ctx.Err() != nil {
		return
	}
	if d != nil && w.gen.recreate && w.gen.state() == podTerminated && m.evict == nil {
		w.nudge() // it starts again at the next sync; a hold's lift nudges it
	}
	if d != nil && d.reclaim {
		w.pruneLogsOfReclaimed(pod)
	}
	w.syncProbes(ctx, pod)
	if !deadline.IsZero() && (retry.IsZero() || deadline.Before(retry)) {
		retry = deadline
	}
	w.publish(pod)
	if at := w.checkRollout(pod); !at.IsZero() && (retry.IsZero() || at.Before(retry)) {
		retry = at
	}
	w.setTimer(retry)
	w.a.synced(w.key, m.seq)
}

// syncPod runs the desired generation as its spec and restartPolicy say.
func (w *worker) syncPod(ctx context.Context, d *desiredPod) time.Time {
	// The containers removed to restart all the pod's containers wait as
	// RestartingAllContainers in the status published before this sync's
	// steps only, as the kubelet's (the next status it generates has its
	// AllContainersRestarting condition false): then PodInitializing or
	// ContainerCreating.
	for _, ci := range w.gen.ctrs {
		if ci.reason == status.RestartingAllContainers {
			ci.reason, ci.message = "", ""
		}
	}
	return w.apply(ctx, d.pod, plan(d, w.pods))
}

// syncTerminatingPod stops the containers of a generation told to stop;
// once none runs, the generation is terminated and synced as such.
func (w *worker) syncTerminatingPod(ctx context.Context, d *desiredPod) time.Time {
	w.gen.settle(d, w.pods[w.gen.uid], time.Now())
	if d.state = w.gen.state(); d.state == podTerminated {
		return w.syncTerminatedPod(ctx, d)
	}
	return w.apply(ctx, d.pod, plan(d, w.pods))
}

// syncTerminatedPod gives back what a terminated generation holds, if it
// releases it (evicted), or what reclaim asks of one that keeps it.
func (w *worker) syncTerminatedPod(ctx context.Context, d *desiredPod) time.Time {
	return w.apply(ctx, d.pod, plan(d, w.pods))
}

// advance brings the desired generation to the state that what the worker
// was told gives it: an eviction makes a syncing pod terminating, its lift
// a new generation, a passed active deadline a terminating one. It returns
// the pod to plan, in that state and with what reclaim asks of this sync,
// and when its active deadline passes (zero: never, or already).
func (w *worker) advance(m mail) (*desiredPod, time.Time) {
	pod := m.pod
	d := w.resolve(pod)
	switch {
	case m.evict != nil && (w.gen.stop == nil || w.gen.stop.reason == reasonRecreated):
		// A pod stopping only to start again (its manifest removed and
		// written again) takes the hold's stop instead: its reason, its
		// grace; it starts again once the hold is lifted.
		w.gen.stop = nil
		w.evicted(pod, m.evict)
	case m.evict == nil && w.gen.stop != nil && w.gen.stop.evicted():
		w.evictionLifted(pod)
		d = w.resolve(pod)
	case w.gen.recreate && w.gen.state() == podTerminated && m.evict == nil:
		// Not while an eviction or the CRI's stop holds it: it starts again
		// once the hold is lifted.
		w.recreated(pod)
		d = w.resolve(pod)
	}
	if m.recreate {
		// Under a hold, remembered for its lift: a pod the hold stopped for
		// another reason than an eviction (its active deadline) starts
		// again then, as it would have without the hold.
		w.gen.recreate = true
		if m.evict == nil && w.gen.terminate(&stopRequest{reason: reasonRecreated}, time.Now()) {
			w.logger.Info("manifest removed and written again; stopping the pod to start it again")
		}
	}
	deadline := w.checkDeadline(d)
	d.state, d.stop = w.gen.state(), w.gen.stop
	d.released = m.evict != nil
	d.reclaim = m.reclaimed != nil
	if d.stop != nil || d.reclaim {
		w.keepFinal(string(pod.UID))
	}
	d.final = w.gen.final
	if d.reclaim && reclaimsFinished(d, d.view(w.pods[string(pod.UID)])) && !w.storeFinal() {
		d.reclaim = false
	}
	return d, deadline
}

// refreshVolumes keeps the downwardAPI volumes of a pod with a sandbox up to
// date: the kubelet's volume manager remounts on every sync, so a volume
// follows edited labels and annotations.
func (w *worker) refreshVolumes(pod *v1.Pod) {
	st := w.pods[string(pod.UID)]
	if st == nil {
		return
	}
	st.grace = podGrace(pod)
	if !st.sandbox {
		return
	}
	if err := w.a.conv.RefreshVolumes(pod); err != nil {
		w.logger.Warn("cannot refresh the pod's volumes", "uid", pod.UID, "err", err)
	}
}

// beforeApply shows what the worker knows before it acts: hooks, the probes
// of what runs and the sandbox's network, then the status; then it stops
// the probes of what no longer runs.
func (w *worker) beforeApply(ctx context.Context, pod *v1.Pod) {
	// Before the first publish: an adopted container whose postStart hook
	// runs again is never shown started meanwhile.
	w.syncPostStarts(ctx, pod)
	// Before the first publish too: an adopted container's probes take up
	// what the daemon before kept of them (their marks), so a Ready pod is
	// never shown unready across a daemon restart. Only started: the
	// probes no longer wanted are stopped after the publish, which a probe
	// slow to stop does not hold up.
	w.startProbes(ctx, pod)
	// And where the pod is on the network: an adopted sandbox's pod IPs
	// are shown by the first status too.
	if pod != nil {
		if st := w.pods[string(pod.UID)]; st != nil {
			w.sandboxStatus(ctx, pod, st)
		}
	}
	// A new generation shows at once, waiting while an older one stops, and
	// a pod no longer desired shows Terminating until nothing of it is left.
	w.publish(pod)
	w.syncProbes(ctx, pod)
	w.markProbes(pod)
	w.markHooks()
}

// pruneLogsOfReclaimed removes the logs of the dead containers reclaim
// removed, once the pod has none left (the kubelet's container GC removes
// a removed container's logs).
func (w *worker) pruneLogsOfReclaimed(pod *v1.Pod) {
	if st := w.pods[string(pod.UID)]; st == nil || len(st.containers) > 0 {
		return
	}
	for _, c := range manifest.AllContainers(pod) {
		if err := w.a.conv.PruneLogs(pod, c.Name, math.MaxInt); err != nil {
			w.logger.Warn("remove logs of a stopped pod failed", "container", c.Name, "err", err)
		}
	}
}

// resolve returns pod with the hash of each container, computed once per UID.
func (w *worker) resolve(pod *v1.Pod) *desiredPod {
	if w.gen == nil || w.gen.uid != string(pod.UID) {
		if w.gen != nil {
			w.forgetBackoff(w.gen.uid)
		}
		now := time.Now()
		w.gen = &generation{
			uid:       string(pod.UID),
			policy:    pod.Spec.RestartPolicy,
			hashes:    map[string]string{},
			convErr:   map[string]error{},
			ctrs:      map[string]*ctrInfo{},
			syncedAt:  now,
			startTime: now,
		}
		if st := w.pods[w.gen.uid]; st != nil {
			w.gen.startTime = adoptedStart(st, w.gen.startTime)
			if w.prevState == nil {
				// Found running at start (nothing published yet): the
				// instances the daemon before replaced are its
				// containers' lastState, and its first status is made
				// from the conditions that daemon published, each
				// keeping its transition time unless it moves.
				w.loadLast(w.gen.uid, st)
				if conds := w.loadConditions(w.gen.uid); conds != nil {
					w.prevState = &v1.PodStatus{Conditions: conds}
					w.kept.uid, w.kept.conds = w.gen.uid, conds
				}
			}
		}
		w.gen.firstAttempt = w.a.removed.take(w.gen.uid, now)
		// What reclaim removed of a pod that had finished with it, before
		// a daemon restart: it stays finished (storeFinal).
		w.gen.final = w.loadFinal(w.gen.uid)
		// The kubelet's startTime is when it first took the pod on: kept
		// across daemon restarts, which a pod whose containers were all
		// replaced since (a crash loop) could not tell otherwise.
		if w.a.cfg.Seen != nil {
			w.gen.startTime = w.a.cfg.Seen.Started(w.gen.uid, w.gen.startTime)
			if st := w.pods[w.gen.uid]; st != nil && st.sandbox && !st.unprepared {
				// A pod found with its sandbox: a daemon killed between
				// the sandbox and its records (written beside the first
				// start) left them missing, and nothing else writes them.
				// Each that exists is kept.
				if err := w.a.cfg.Seen.Record(pod, w.gen.startTime); err != nil {
					w.logger.Warn("cannot record when the pod was first seen", "uid", w.gen.uid, "err", err)
				}
			}
		}
		for _, c := range manifest.AllContainers(pod) {
			spec, err := w.a.conv.Container(pod, c, 0)
			if manifest.IsMissing(err) {
				// What it needs of the pod's ConfigMaps and Secrets may
				// come later: the container waits for it at each start
				// (CreateContainerConfigError), and starts once it is there.
				h, herr := manifest.ContainerHash(pod, c)
				spec, err = &podspec.Container{Hash: h}, herr
			}
			if err != nil {
				w.gen.convErr[c.Name] = err
				w.a.events.Eventf(events.ContainerRef(pod, c.Name), v1.EventTypeWarning, events.Failed, "Error: %v", err)
				continue
			}
			w.gen.hashes[c.Name] = spec.Hash
		}
	}
	return &desiredPod{pod: pod, hashes: w.gen.hashes, firstAttempt: w.gen.firstAttempt}
}

// rememberAttempts records, before the worker removes its pods, the attempt
// each of their containers would start as next, for a pod of the same UID
// that comes back (removedAttempts).
func (w *worker) rememberAttempts() {
	now := time.Now()
	for uid, st := range w.pods {
		next := map[string]int{}
		for name, c := range latestByName(st.containers) {
			next[name] = c.Attempt + 1
		}
		w.a.removed.remember(uid, next, now)
	}
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

func findContainer(pod *v1.Pod, name string) *v1.Container {
	// In place, init containers first as manifest.AllContainers lists
	// them: each publish looks up its running containers so.
	for _, list := range [2][]v1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i]
			}
		}
	}
	return nil
}

// forgetBackoff drops the restart and pull back-offs of a pod.
func (w *worker) forgetBackoff(uid string) {
	w.backoff.forget(uid)
	w.images.Forget(uid)
}
