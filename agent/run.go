package agent

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/source"
	"github.com/staticpodd/staticpodd/agent/status"
	"github.com/staticpodd/staticpodd/agent/tick"
)

// orphanPrefix keys workers that only remove an adopted pod nobody wants.
const orphanPrefix = "orphan/"

// loop is the state of Run's goroutine.
type loop struct {
	sources map[string]source.Update
	stash   map[string]*podState // adopted pods no worker owns yet, by UID
	names   map[string]podName   // adopted pod UID -> its name, as the runtime recorded it
	seq     uint64
	allSeen bool
	// recreated is the newest Recreated token acted on, by pod UID.
	recreated map[types.UID]uint64
	wg        sync.WaitGroup

	// Until the leftover sweep: every pod UID found at start and every UID
	// handed to a worker, which no sweep may touch. nil once swept.
	adopted, handed map[string]bool
}

// Run adopts what the runtime already runs, then reconciles every update until ctx
// ends. Pods keep running when it returns: they outlive the daemon.
func (a *Agent) Run(ctx context.Context, updates <-chan source.Update) error {
	l := &loop{sources: map[string]source.Update{}}
	a.events.Eventf(events.NodeRef(a.cfg.NodeName), v1.EventTypeNormal, events.Starting, "Starting staticpodd.")
	if err := a.adopt(ctx, l); err != nil {
		return err
	}
	defer l.wg.Wait()
	l.wg.Go(func() { a.runPressure(ctx) })
	l.wg.Go(func() { a.files.Run(ctx) })
	l.wg.Go(func() { a.runFollow(ctx) })
	defer a.onChange.wg.Wait()

	// On the shared clock: the resync wakes with the eviction manager's
	// housekeeping and the relists (agent/tick).
	syncTick := tick.New(a.cfg.SyncFrequency)
	defer syncTick.Stop()
	// Without a systemd watchdog there is no ping to send: the sync tick
	// alone wakes the loop, often enough for SyncLoopHealthCheck.
	var watchdogC <-chan time.Time
	if a.cfg.WatchdogPeriod > 0 {
		watchdog := tick.New(a.cfg.WatchdogPeriod)
		defer watchdog.Stop()
		watchdogC = watchdog.C
	}

	l.allSeen = a.seenAll(l)
	if l.allSeen {
		a.reconcile(ctx, l)
	}
	for {
		a.loopAt.Store(time.Now().UnixNano())
		a.cfg.Notifier.Watchdog()
		select {
		case <-ctx.Done():
			return nil
		case u, ok := <-updates:
			if !ok {
				updates = nil // sources are gone; pods keep running
				continue
			}
			l.sources[u.Source] = u
			l.allSeen = a.seenAll(l)
			a.reconcile(ctx, l)
		case <-a.rerun:
			a.reconcile(ctx, l)
		case <-a.regenerate:
			a.reconcile(ctx, l)
		case <-a.files.Changed():
			a.reconcile(ctx, l)
		case <-a.resync:
			a.nudgeAll()
		case <-syncTick.C:
			a.nudgeAll()
		case <-watchdogC:
		}
	}
}

func (a *Agent) seenAll(l *loop) bool {
	for _, s := range a.cfg.Sources {
		if _, ok := l.sources[s]; !ok {
			return false
		}
	}
	return true
}

// adopt reads what the runtime has, grouped by pod UID, before the first plan.
func (a *Agent) adopt(ctx context.Context, l *loop) error {
	cs, err := a.rt.List(ctx)
	if err != nil {
		return fmt.Errorf("list containers to adopt: %w", err)
	}
	sbs, err := a.rt.ListSandboxes(ctx)
	if err != nil {
		return fmt.Errorf("list sandboxes to adopt: %w", err)
	}
	l.stash, l.names = map[string]*podState{}, map[string]podName{}
	l.adopted, l.handed = map[string]bool{}, map[string]bool{}
	get := func(uid string) *podState {
		if l.stash[uid] == nil {
			l.stash[uid] = &podState{uid: uid}
			l.adopted[uid] = true
		}
		return l.stash[uid]
	}
	for _, uid := range sbs {
		get(uid).sandbox = true
	}
	for _, st := range l.stash {
		st.unprepared = st.sandbox // until a container says otherwise
	}
	for _, c := range cs {
		st := get(c.PodUID)
		st.unprepared = false
		st.containers = append(st.containers, c)
		if c.PodName != "" {
			l.names[c.PodUID] = podName{c.PodNamespace, c.PodName}
		}
	}
	if len(cs) > 0 || len(sbs) > 0 {
		a.logger.Info("found existing pods", "pods", len(l.stash), "containers", len(cs))
	}
	return nil
}

// reconcile merges the sources and hands each pod to its worker.
func (a *Agent) reconcile(ctx context.Context, l *loop) {
	a.mu.Lock()
	defer func() {
		a.mu.Unlock()
		a.statusChanged()
	}()
	running := map[string]bool{}
	for uid := range l.stash {
		running[uid] = true
	}
	workerUIDs := map[string]string{}
	for key, w := range a.workers {
		if uid := w.desiredUID(); uid != "" {
			running[uid] = true
			workerUIDs[key] = uid
		}
	}
	pods, problems := merge(l.sources, running)
	objs, objProblems := mergeObjects(l.sources)
	a.objects.Store(objs)
	problems = append(problems, objProblems...)
	a.restarts.apply(pods, l.allSeen, a.logger)
	a.follow.apply(pods, l.allSeen, a.logger)
	a.applyWatchedFiles(ctx, pods, running)
	recreated := make(map[types.UID]uint64, len(pods))
	problems = append(problems, a.substituteRollbacks(pods)...)
	problems = append(problems, dropSharedUIDs(pods, workerUIDs)...)
	problems = append(problems, a.checkOrderLocked(pods)...)
	// After the order's check: a pod that starts after a waiting one waits
	// for it, as for one not ready yet.
	problems = append(problems, a.waitForHeldUIDsLocked(pods, l.stash)...)
	a.problems = problems
	a.recordProblemsLocked(problems)
	if l.allSeen && l.adopted != nil {
		a.sweep(l, pods)
	}
	l.seq++

	wantedUIDs := make(map[string]bool, len(pods))
	for _, p := range pods {
		wantedUIDs[string(p.UID)] = true
	}
	for key, p := range pods {
		w := a.workers[key]
		// Only the generation the worker has restarts (running, or being
		// removed: the list ran between the rm and the write); a manifest
		// written back with new content is an edit, its pod new anyway.
		known := w != nil && (w.desiredUID() == "" || w.desiredUID() == string(p.UID))
		if w == nil {
			claimed := a.claim(l, p, wantedUIDs)
			var refused *stopRequest
			if len(claimed) == 0 {
				// New to the node, not adopted: admitted as the kubelet does
				// under pressure.
				refused = a.admitLocked(key, p.Pod)
			}
			w = a.startWorkerLocked(ctx, l, key, claimed, p.Pod, l.seq, refused)
		} else if old := w.desiredUID(); old != string(p.UID) {
			// An edit, or a pod whose earlier generation is still stopping:
			// the new one starts once the old one is gone.
			a.logger.Info("new pod generation; it starts once the previous one has stopped", "pod", key, "uid", p.UID, "previous", old)
		}
		if l.handed != nil {
			l.handed[string(p.UID)] = true
		}
		w.update(p.Pod, l.seq)
		if known && p.Recreated > l.recreated[p.UID] {
			w.recreate(string(p.UID))
		}
		recreated[p.UID] = max(p.Recreated, l.recreated[p.UID])
	}
	l.recreated = recreated
	a.trackStopsLocked(pods)
	for key, w := range a.workers {
		if _, ok := pods[key]; !ok && !strings.HasPrefix(key, orphanPrefix) {
			w.update(nil, l.seq)
		}
	}
	if l.allSeen && a.readyAt == 0 {
		a.firstFullReconcileLocked(ctx, l, pods)
	}
}

// firstFullReconcileLocked runs once every source has spoken: what nobody
// claimed is removed, and readiness waits for each desired pod's first sync.
// An adopted pod whose name the runtime recorded is stopped by the worker of
// that name, so a manifest of that name arriving while it stops goes to the
// same worker, which stops the old generation before it starts the new one,
// as for an edit. Only a pod with no recorded name has an orphan/<uid>
// worker of its own.
func (a *Agent) firstFullReconcileLocked(ctx context.Context, l *loop, pods map[string]manifest.Pod) {
	byKey := map[string]map[string]*podState{}
	for uid, st := range l.stash {
		key := l.names[uid].key()
		if key == "" || a.workers[key] != nil {
			key = orphanPrefix + uid
		}
		if byKey[key] == nil {
			byKey[key] = map[string]*podState{}
		}
		byKey[key][uid] = st
	}
	for key, owned := range byKey {
		// Listed as Terminating until they are gone.
		w := a.startWorkerLocked(ctx, l, key, owned, nil, l.seq, nil)
		w.update(nil, l.seq)
	}
	l.stash = nil
	close(a.reconciled)
	a.listing.reconciled(slices.Collect(maps.Keys(a.workers)))
	a.readyAt = l.seq
	a.readyWait = map[string]bool{}
	for key := range pods {
		a.readyWait[key] = true
	}
	a.maybeReadyLocked()
}

// sweep removes, once, the <root-dir>/pods/<uid> directories and pod log
// directories that nothing claims: an earlier daemon's leftovers (a pod
// removed while it was down, a generation it never started, one it was
// tearing down when it died). It runs when every source has delivered its
// first snapshot and before that snapshot is handed to the workers, and keeps
// the UID of every pod about to be handed (pods), every UID found running or
// with a sandbox at start (a pod whose manifest is missing for a moment keeps
// its emptyDir until its worker has stopped its containers and removes it),
// and every UID handed to a worker before, which may be making its sandbox
// now. Workers only ever touch UIDs in those sets, so nothing races the sweep.
// A UID a source lists is not kept for itself: a pod that follows its tags,
// or is rolled back, runs another generation, and the listed one, not running,
// would keep what an earlier daemon left of it for good.
func (a *Agent) sweep(l *loop, pods map[string]manifest.Pod) {
	keep := l.adopted
	for uid := range l.handed {
		keep[uid] = true
	}
	for _, p := range pods {
		keep[string(p.UID)] = true
	}
	l.adopted, l.handed = nil, nil
	a.pruneRollouts(l.sources)
	removed, err := a.conv.RemoveLeftovers(keep)
	if len(removed) > 0 {
		a.logger.Info("removed leftover pod directories", "count", len(removed))
	}
	if err != nil {
		a.logger.Warn("leftover pod directories not removed", "err", err)
	}
}

// claim takes from the stash the adopted pods a new worker for p owns: p's own UID
// and older generations with the same full name, which it stops first.
//
// A UID another wanted pod has (a manifest renamed while the daemon was
// down, its metadata.uid kept) is that pod's, not the name's.
func (a *Agent) claim(l *loop, p manifest.Pod, wanted map[string]bool) map[string]*podState {
	pods := map[string]*podState{}
	for uid, st := range l.stash {
		if uid == string(p.UID) || (l.names[uid].is(p) && !wanted[uid]) {
			pods[uid] = st
			delete(l.stash, uid)
		}
	}
	return pods
}

// podName is the name of an adopted pod as the runtime recorded it. Records
// of daemons older than the namespace field have no namespace.
type podName struct{ namespace, name string }

// key is the key of the worker of the pod named n, "" if n is incomplete.
func (n podName) key() string {
	if n.namespace == "" || n.name == "" {
		return ""
	}
	return n.namespace + "/" + n.name
}

// is says whether p has name n (any namespace, for a record without one).
func (n podName) is(p manifest.Pod) bool {
	return n.name == p.Name && (n.namespace == "" || n.namespace == p.Namespace)
}

// startWorkerLocked starts the worker of key with the adopted pods it owns
// and the pod it is to run (nil: stop them). The desired pod is set before
// the worker's first sync: a worker that synced first with none would stop
// the adopted containers of a pod that is still wanted.
func (a *Agent) startWorkerLocked(ctx context.Context, l *loop, key string, pods map[string]*podState, desired *v1.Pod, seq uint64, refused *stopRequest) *worker {
	w := newWorker(a, key, pods)
	for uid := range pods {
		a.holdUIDLocked(uid, key)
	}
	w.seed(desired, seq, refused)
	a.workers[key] = w
	l.wg.Go(func() { w.run(ctx) })
	return w
}

func (a *Agent) nudgeAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.workers {
		w.nudge()
	}
}

// synced records that a worker finished a sync of the dispatch seq.
func (a *Agent) synced(key string, seq uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.readyAt == 0 || seq < a.readyAt {
		return
	}
	delete(a.readyWait, key)
	a.maybeReadyLocked()
}

func (a *Agent) maybeReadyLocked() {
	if a.readyAt != 0 && len(a.readyWait) == 0 && !a.notifyReady {
		a.notifyReady = true
		a.logger.Info("all sources seen and pods synced: ready")
		a.cfg.Notifier.Ready()
		a.statuses.Touch()
	}
}

// recordProblemsLocked records a FailedValidation event (ManifestWarning for a
// warning) for each manifest problem that was not there at the last
// reconcile.
func (a *Agent) recordProblemsLocked(problems []manifest.Problem) {
	seen := map[string]bool{}
	for _, p := range problems {
		msg := problemMessage(p)
		key := p.Origin + "\x00" + msg
		seen[key] = true
		switch {
		case a.problemSeen[key]:
		case p.Fetch:
			a.events.Eventf(events.NodeRef(a.cfg.NodeName), v1.EventTypeWarning, events.FailedFetch,
				"Error fetching manifests from %s: %s", p.Origin, msg)
		case p.Warning:
			a.events.Eventf(events.NodeRef(a.cfg.NodeName), v1.EventTypeWarning, events.ManifestWarning,
				"Manifest %s is used, but: %s", p.Origin, msg)
		default:
			a.events.Eventf(events.NodeRef(a.cfg.NodeName), v1.EventTypeWarning, events.FailedValidation,
				"Error validating manifest %s: %s", p.Origin, msg)
		}
	}
	a.problemSeen = seen
}

// problemMessage is a problem's error without its origin, which errors of
// manifests start with.
func problemMessage(p manifest.Problem) string {
	if p.Err == nil {
		return ""
	}
	return strings.ReplaceAll(p.Err.Error(), p.Origin+": ", "")
}

// removeWorker forgets a worker that has nothing left to do, unless a new desired
// pod reached it meanwhile. Desired pods are handed to workers under a.mu
// (reconcile), so none can arrive between the check and the removal.
func (a *Agent) removeWorker(w *worker) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if w.wanted() != nil {
		return false
	}
	if a.workers[w.key] == w {
		delete(a.workers, w.key)
		a.statuses.Remove(w.key)
		a.forgetStopLocked(w.key)
	}
	delete(a.readyWait, w.key)
	a.maybeReadyLocked()
	return true
}

// Pods returns every desired pod with its live status, and the older
// generations still stopping, sorted by full name (status.Manager.Pods).
func (a *Agent) Pods() []v1.Pod { return a.debugs.withDebug(a.statuses.Pods()) }

// PodFigures calls f with what the metrics read of each pod, in the order of
// Pods, without a copy of any pod (status.Manager.Figures): fig is f's only
// while it runs. The figures have no debug container (Pods lists them as
// ephemeral containers, which the metrics do not count).
func (a *Agent) PodFigures(f func(fig *status.Figures)) { a.statuses.Figures(f) }

// Problems returns the manifests that could not be used, and duplicates.
func (a *Agent) Problems() []manifest.Problem {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.problems)
}

// Summary is one line for systemd's STATUS.
func (a *Agent) Summary() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.summaryLocked()
}

// summaryLocked is the STATUS line: the pods, then the node conditions.
// It costs the number of waiting pods, not of all pods.
func (a *Agent) summaryLocked() string {
	s := a.statuses.Line(len(a.problems))
	if rb := a.rollouts.line(); rb != "" {
		s += "; " + rb
	}
	if c := a.Conditions(); len(c) > 0 {
		s += "; node has " + joinConditions(c)
	}
	return s
}

func isOrphanKey(key string) bool { return strings.HasPrefix(key, orphanPrefix) }

// Changed returns a channel that is closed at the next change of any pod's
// status, of the manifest problems or of the node's conditions: subscribers
// read Pods then, instead of polling it.
func (a *Agent) Changed() <-chan struct{} { return a.statuses.Changed() }

// statusChanged tells the subscribers of Changed that the manifest problems
// or the node's conditions changed, and the notifier the STATUS line; a
// pod's change reaches them through the status manager.
func (a *Agent) statusChanged() {
	a.statuses.Touch()
	a.summaryChanged()
}

// summaryChanged sends the notifier the STATUS line when it changed.
func (a *Agent) summaryChanged() {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.summaryLocked()
	if s == a.summary {
		return
	}
	a.summary = s
	a.cfg.Notifier.Status(s)
}

// SyncLoopHealthCheck fails when the reconcile loop has not begun an
// iteration for twice the sync frequency, at least five minutes, as the
// kubelet's SyncLoopHealthCheck (its /healthz "syncloop" check). The loop
// wakes at least every SyncFrequency, so only a wedged loop fails it.
func (a *Agent) SyncLoopHealthCheck() error {
	at := a.loopAt.Load()
	if at == 0 {
		return nil
	}
	d := max(2*a.cfg.SyncFrequency, 5*time.Minute)
	if last := time.Unix(0, at); time.Since(last) > d {
		return fmt.Errorf("sync loop took longer than expected: last iteration began %s ago", time.Since(last).Round(time.Second))
	}
	return nil
}
