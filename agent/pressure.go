package agent

import (
	"context"
	"maps"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/eviction"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/tick"
)

// DefaultHousekeeping is how often node pressure is checked without a
// notification: the kubelet's housekeeping interval.
const DefaultHousekeeping = 10 * time.Second

// podCleanupTimeout is how long the eviction manager waits for an evicted
// pod's processes to be gone before it may evict another (the kubelet's).
const podCleanupTimeout = 30 * time.Second

// EvictionConfig is how the agent relieves node pressure; no thresholds: it
// never evicts.
type EvictionConfig struct {
	eviction.Config
	// Housekeeping is how often the signals are checked; default
	// DefaultHousekeeping.
	Housekeeping time.Duration
	// NewNotifier, when set, makes the memory notifier that has the agent
	// check at once when the node's memory usage crosses the lowest
	// memory.available threshold. It is called once, when there first are
	// thresholds (at start, or when a reload sets some).
	NewNotifier func() (MemoryNotifier, error)
	// Reclaim, when set, frees node-level disk space before any pod is
	// evicted for disk pressure, and returns how many bytes it freed.
	Reclaim func(ctx context.Context, keepImages []string) (uint64, error)
}

// MemoryNotifier tells when the node's memory usage crosses a threshold
// (the kubelet's memory threshold notifier); oci.MemoryNotifier is one.
type MemoryNotifier interface {
	// SetThreshold arms a notification for the node's memory usage
	// crossing bytes, replacing the one before.
	SetThreshold(bytes uint64) error
	Events() <-chan struct{}
}

// pressure is the eviction manager's state in the agent.
type pressure struct {
	m         *eviction.Manager
	heartbeat time.Time
	// evicted are the pods the manager stopped, or refused at admission, by
	// worker key: the UID it stopped.
	evicted map[string]string
	// last is the pod evicted last and when, to wait for its cleanup.
	last   string
	lastAt time.Time
	// evictions counts the pods evicted, by signal (kubelet_evictions).
	evictions map[string]uint64
	// notifier is the memory notifier once made; owned by runPressure.
	notifier MemoryNotifier
	// changed wakes runPressure when SetEviction changed the thresholds.
	changed chan struct{}
}

// runPressure checks node pressure every housekeeping interval, and when the
// notifier fires, while there are thresholds, until ctx ends.
func (a *Agent) runPressure(ctx context.Context) {
	var housekeeping *tick.Ticker
	defer func() {
		if housekeeping != nil {
			housekeeping.Stop()
		}
	}()
	var notified <-chan struct{}
	triedNotifier := false
	for {
		var tickc <-chan time.Time
		if len(a.thresholds()) > 0 {
			if !triedNotifier && a.cfg.Eviction.NewNotifier != nil {
				triedNotifier = true
				n, err := a.cfg.Eviction.NewNotifier()
				if err != nil {
					a.logger.Warn("memory threshold notifier not available; memory pressure is polled only", "err", err)
				} else {
					a.pr.notifier, notified = n, n.Events()
				}
			}
			if housekeeping == nil {
				housekeeping = tick.New(a.cfg.Eviction.Housekeeping)
			}
			tickc = housekeeping.C
			a.housekeep(ctx)
		} else if housekeeping != nil {
			housekeeping.Stop()
			housekeeping = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-tickc:
		case <-a.pr.changed:
		case <-notified:
			a.logger.Debug("eviction manager: memory threshold crossed")
		}
	}
}

// thresholds are the eviction thresholds in force.
func (a *Agent) thresholds() []eviction.Threshold {
	a.pmu.Lock()
	defer a.pmu.Unlock()
	return a.pr.m.Thresholds()
}

// SetEviction changes the eviction thresholds, their grace periods, minimum
// reclaims, the pressure transition period and the maximum grace period of
// soft evictions (a reload). What was observed of thresholds that stay is
// kept (their grace periods run on); with no thresholds left, pods held back
// by an eviction may start again at once, since nothing would ever let them.
func (a *Agent) SetEviction(cfg eviction.Config) {
	a.pmu.Lock()
	a.pr.m.SetConfig(cfg)
	var lift map[string]string
	if len(cfg.Thresholds) == 0 && len(a.pr.evicted) > 0 {
		lift, a.pr.evicted = a.pr.evicted, map[string]string{}
	}
	a.pmu.Unlock()
	for key := range lift {
		if w := a.worker(key); w != nil {
			w.setEviction("", nil)
		}
	}
	select {
	case a.pr.changed <- struct{}{}:
	default:
	}
	a.statusChanged()
}

// housekeep is one synchronize of the eviction manager: observe, update the
// conditions, let evicted pods return once pressure has been gone for the
// transition period, and relieve the most urgent threshold met: reclaim
// first, then evict one pod.
func (a *Agent) housekeep(ctx context.Context) {
	// The signals are the node's; the pods' usage is read only to rank
	// them, once a threshold is met.
	node, err := a.rt.NodeStats(ctx)
	if err != nil && node.Time.IsZero() {
		a.logger.Warn("eviction manager: no stats", "err", err)
		return
	}
	if err != nil {
		a.logger.Debug("eviction manager: stats incomplete", "err", err)
	}
	now := time.Now()
	a.armNotifier(node)
	a.pmu.Lock()
	before := slices.Clone(a.pr.conds())
	p := a.pr.m.Synchronize(eviction.Observe(node), now)
	a.pr.heartbeat = now
	changed := !slices.Equal(before, p.Conditions)
	var lift map[string]string
	if len(a.pr.evicted) > 0 && a.pr.m.ClearFor(now) {
		lift, a.pr.evicted = a.pr.evicted, map[string]string{}
	}
	a.pmu.Unlock()
	if changed {
		a.logger.Info("node conditions changed", "conditions", p.Conditions)
		a.statusChanged()
	}
	for key := range lift {
		if w := a.worker(key); w != nil {
			w.setEviction("", nil)
		}
	}
	if len(p.Act) == 0 {
		return
	}
	t := p.Act[0]
	res := eviction.Resource(t)
	a.events.Eventf(events.NodeRef(a.cfg.NodeName), v1.EventTypeWarning, "EvictionThresholdMet", "Attempting to reclaim %s", res)
	if res != v1.ResourceMemory && res != "pids" && a.cfg.Eviction.Reclaim != nil && a.reclaim(ctx, t) {
		return
	}
	sum, err := a.rt.Stats(ctx)
	if sum == nil {
		a.logger.Warn("eviction manager: no pod stats to rank pods by", "err", err)
		return
	}
	if !a.cleanedUp(sum, now) {
		return
	}
	a.evictOne(sum, t, p, now)
}

// armNotifier sets the memory notifier's threshold where memory.available
// meets its highest threshold: capacity − threshold + inactive file pages
// (usage − working set), as the kubelet's memoryThresholdNotifier does.
func (a *Agent) armNotifier(n podspec.NodeStats) {
	mn := a.pr.notifier
	if mn == nil || n.MemoryCapacity == 0 {
		return
	}
	var highest int64
	for _, t := range a.thresholds() {
		if t.Signal == eviction.MemoryAvailable {
			highest = max(highest, t.Value.Of(int64(n.MemoryCapacity)))
		}
	}
	if highest == 0 {
		return
	}
	inactive := n.MemoryUsage - min(n.MemoryUsage, n.MemoryWorkingSet)
	at := int64(n.MemoryCapacity) - highest + int64(inactive)
	if at <= 0 {
		return
	}
	if err := mn.SetThreshold(uint64(at)); err != nil {
		a.logger.Warn("eviction manager: memory notifier not armed", "err", err)
	}
}

// reclaim frees node-level resources for t and reports whether that was
// enough (reclaimNodeLevelResources), in the kubelet's order: dead
// containers first (those of stopped pods: their writable layers), then
// what Reclaim frees (rotated logs, unused images).
func (a *Agent) reclaim(ctx context.Context, t eviction.Threshold) bool {
	a.mu.Lock()
	var waits []<-chan struct{}
	for _, w := range a.workers {
		waits = append(waits, w.reclaim())
	}
	a.mu.Unlock()
	timeout := time.NewTimer(podCleanupTimeout)
	defer timeout.Stop()
wait:
	for _, ch := range waits {
		select {
		case <-ch:
		case <-timeout.C:
			break wait
		case <-ctx.Done():
			return false
		}
	}
	freed, err := a.cfg.Eviction.Reclaim(ctx, a.ImagesInUse())
	if err != nil {
		a.logger.Warn("eviction manager: reclaim failed", "err", err)
	}
	a.logger.Info("eviction manager: reclaimed node-level resources", "bytes", freed)
	sum, err := a.rt.Stats(ctx)
	if sum == nil {
		a.logger.Warn("eviction manager: no stats after reclaim", "err", err)
		return false
	}
	if eviction.Relieved(t, eviction.Observe(sum.Node)) {
		a.logger.Info("eviction manager: able to reduce resource pressure without evicting pods", "resource", eviction.Resource(t))
		return true
	}
	return false
}

// ImagesInUse are the images of every pod a manifest lists, running or not,
// and the images the kept generations of those pods ran: what image garbage
// collection keeps, so that a rollback finds the digest it runs again.
func (a *Agent) ImagesInUse() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var refs []string
	for _, w := range a.workers {
		if pod := w.wanted(); pod != nil {
			for _, c := range manifest.AllContainers(pod) {
				refs = append(refs, c.Image)
			}
		}
	}
	return append(refs, a.rollouts.keptImages()...)
}

// cleanedUp reports whether the pod evicted last has no process left, or
// was given podCleanupTimeout: only then is another evicted.
func (a *Agent) cleanedUp(sum *podspec.Summary, now time.Time) bool {
	a.pmu.Lock()
	defer a.pmu.Unlock()
	if a.pr.last == "" || now.Sub(a.pr.lastAt) >= podCleanupTimeout {
		return true
	}
	for _, ps := range sum.Pods {
		if ps.UID == a.pr.last && ps.Pids > 0 {
			return false
		}
	}
	return true
}

// evictOne ranks the pods that run and evicts the first one that is not
// critical.
func (a *Agent) evictOne(sum *podspec.Summary, t eviction.Threshold, p eviction.Pressure, now time.Time) {
	stats := map[string]*podspec.PodStats{}
	for i := range sum.Pods {
		stats[sum.Pods[i].UID] = &sum.Pods[i]
	}
	a.pmu.Lock()
	evicted := maps.Clone(a.pr.evicted)
	a.pmu.Unlock()
	var cands []eviction.Candidate
	keys := map[string]string{}
	a.mu.Lock()
	for key, w := range a.workers {
		pod := w.activePod()
		if pod == nil || evicted[key] == string(pod.UID) {
			continue
		}
		keys[string(pod.UID)] = key
		cands = append(cands, eviction.Candidate{Pod: pod, Stats: stats[string(pod.UID)]})
	}
	a.mu.Unlock()
	slices.SortFunc(cands, func(x, y eviction.Candidate) int { return strings.Compare(string(x.Pod.UID), string(y.Pod.UID)) })
	a.pmu.Lock()
	ev, ok := a.pr.m.Pick(t, p, cands)
	a.pmu.Unlock()
	if !ok {
		a.logger.Warn("eviction manager: unable to evict any pod", "threshold", t.String())
		return
	}
	uid := string(ev.Pod.UID)
	key := keys[uid]
	a.logger.Info("eviction manager: evicting pod", "pod", key, "threshold", t.String(), "grace", ev.Grace)
	a.pmu.Lock()
	a.pr.evicted[key] = uid
	a.pr.last, a.pr.lastAt = uid, now
	if a.pr.evictions == nil {
		a.pr.evictions = map[string]uint64{}
	}
	// The kubelet's metrics.Evictions, counted when the manager evicts.
	a.pr.evictions[string(t.Signal)]++
	a.pmu.Unlock()
	if w := a.worker(key); w != nil {
		w.setEviction(uid, &stopRequest{reason: reasonEvicted, message: ev.Message, grace: ev.Grace})
	}
}

func (a *Agent) worker(key string) *worker {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.workers[key]
}

// admit is the eviction manager's admission of a pod new to the node: nil,
// or why it is refused (it fails Evicted, and is started once pressure has
// been gone for the transition period).
func (a *Agent) admitLocked(key string, pod *v1.Pod) *stopRequest {
	a.pmu.Lock()
	defer a.pmu.Unlock()
	ok, msg := a.pr.m.Admit(pod, manifest.QOSClass(pod))
	if ok {
		return nil
	}
	a.pr.evicted[key] = string(pod.UID)
	return &stopRequest{reason: reasonEvicted, message: msg}
}

func (p *pressure) conds() []v1.NodeConditionType {
	var out []v1.NodeConditionType
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		if p.m.Has(c) {
			out = append(out, c)
		}
	}
	return out
}

// Conditions are the node conditions true now: MemoryPressure,
// DiskPressure, PIDPressure.
func (a *Agent) Conditions() []v1.NodeConditionType {
	a.pmu.Lock()
	defer a.pmu.Unlock()
	return a.pr.conds()
}

// PressureConditions are the node's MemoryPressure, DiskPressure and
// PIDPressure conditions as the kubelet's node status setters make them, for
// the Node status: the heartbeat is the last check (now, without thresholds:
// then they are always False), the transition when the condition last
// changed.
func (a *Agent) PressureConditions() []v1.NodeCondition {
	a.pmu.Lock()
	defer a.pmu.Unlock()
	hb := a.pr.heartbeat
	if len(a.pr.m.Thresholds()) == 0 {
		hb = time.Now()
	} else if hb.IsZero() {
		hb = a.started
	}
	var out []v1.NodeCondition
	for _, c := range []struct {
		t              v1.NodeConditionType
		yesReason, yes string
		noReason, no   string
	}{
		{v1.NodeMemoryPressure, "KubeletHasInsufficientMemory", "kubelet has insufficient memory available",
			"KubeletHasSufficientMemory", "kubelet has sufficient memory available"},
		{v1.NodeDiskPressure, "KubeletHasDiskPressure", "kubelet has disk pressure",
			"KubeletHasNoDiskPressure", "kubelet has no disk pressure"},
		{v1.NodePIDPressure, "KubeletHasInsufficientPID", "kubelet has insufficient PID available",
			"KubeletHasSufficientPID", "kubelet has sufficient PID available"},
	} {
		nc := v1.NodeCondition{Type: c.t, Status: v1.ConditionFalse, Reason: c.noReason, Message: c.no,
			LastHeartbeatTime: metav1.NewTime(hb), LastTransitionTime: metav1.NewTime(a.pr.m.Since(c.t))}
		if a.pr.m.Has(c.t) {
			nc.Status, nc.Reason, nc.Message = v1.ConditionTrue, c.yesReason, c.yes
		}
		out = append(out, nc)
	}
	return out
}

func joinConditions(cs []v1.NodeConditionType) string {
	s := make([]string, len(cs))
	for i, c := range cs {
		s[i] = string(c)
	}
	return strings.Join(s, ", ")
}

// NodeName is the node's name.
func (a *Agent) NodeName() string { return a.cfg.NodeName }

// StatsSummary is what the runtime measures of the node and its pods:
// calls that come together share one measurement (sharedStats). Callers
// only read the summary.
func (a *Agent) StatsSummary(ctx context.Context) (*podspec.Summary, error) {
	return a.sharedStats.get(ctx, a.rt.Stats)
}

// Evictions counts the pods the eviction manager evicted, by signal
// (memory.available, nodefs.available, ...), since the daemon started.
func (a *Agent) Evictions() map[string]uint64 {
	a.pmu.Lock()
	defer a.pmu.Unlock()
	if a.pr == nil {
		return nil
	}
	out := make(map[string]uint64, len(a.pr.evictions))
	for k, v := range a.pr.evictions {
		out[k] = v
	}
	return out
}
