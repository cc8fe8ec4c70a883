package eviction

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// The kubelet's messages (pkg/kubelet/eviction/helpers.go).
const (
	nodeLowMessageFmt       = "The node was low on resource: %v. "
	thresholdMetMessageFmt  = "Threshold quantity: %v, available: %v. "
	containerMessageFmt     = "Container %s was using %s, request is %s, has larger consumption of %v. "
	nodeConditionMessageFmt = "The node had condition: %v. "
)

// immediateGrace is the kubelet's immediateEvictionGracePeriodSeconds: how long
// a pod evicted by a hard threshold gets to stop.
const immediateGrace = time.Second

// Critical priorities: kubeadm's control plane static pods name these classes.
const (
	systemCriticalPriority  = 2000000000
	systemNodeCritical      = "system-node-critical"
	systemClusterCritical   = "system-cluster-critical"
	systemNodeCriticalValue = systemCriticalPriority + 1000
)

// Priority is the pod's priority: spec.priority when set, else that of the
// system priority class it names (a static pod's class is never resolved by
// an API server), else 0.
func Priority(pod *v1.Pod) int32 {
	switch {
	case pod.Spec.Priority != nil:
		return *pod.Spec.Priority
	case pod.Spec.PriorityClassName == systemNodeCritical:
		return systemNodeCriticalValue
	case pod.Spec.PriorityClassName == systemClusterCritical:
		return systemCriticalPriority
	}
	return 0
}

// Critical reports whether a pod is never evicted nor refused: it names
// system-node-critical or system-cluster-critical, or its priority is at
// least 2000000000. (The kubelet holds every static pod critical, which would
// leave staticpodd nothing to evict.)
func Critical(pod *v1.Pod) bool {
	return pod.Spec.PriorityClassName == systemNodeCritical || pod.Spec.PriorityClassName == systemClusterCritical ||
		Priority(pod) >= systemCriticalPriority
}

// Observation is what one signal saw: how much is available of capacity.
type Observation struct {
	Available, Capacity int64
}

// Observations are the signals seen at one time.
type Observations map[Signal]Observation

// Observe computes the signals from the runtime's stats as the kubelet's
// makeSignalObservations does. Allocatable memory is the node's capacity
// (staticpodd reserves none), less the working set of the pods' parent cgroup.
func Observe(n podspec.NodeStats) Observations {
	o := Observations{}
	if n.MemoryCapacity > 0 {
		o[MemoryAvailable] = Observation{Available: int64(n.MemoryCapacity) - int64(n.MemoryWorkingSet), Capacity: int64(n.MemoryCapacity)}
		o[AllocatableMemoryAvailable] = Observation{Available: int64(n.MemoryCapacity) - int64(n.PodsMemoryWorkingSet), Capacity: int64(n.MemoryCapacity)}
	}
	if n.NodeFs.CapacityBytes > 0 {
		o[NodeFsAvailable] = Observation{Available: int64(n.NodeFs.AvailableBytes), Capacity: int64(n.NodeFs.CapacityBytes)}
	}
	if n.NodeFs.Inodes > 0 {
		o[NodeFsInodesFree] = Observation{Available: int64(n.NodeFs.InodesFree), Capacity: int64(n.NodeFs.Inodes)}
	}
	if n.ImageFs.CapacityBytes > 0 {
		o[ImageFsAvailable] = Observation{Available: int64(n.ImageFs.AvailableBytes), Capacity: int64(n.ImageFs.CapacityBytes)}
	}
	if n.ImageFs.Inodes > 0 {
		o[ImageFsInodesFree] = Observation{Available: int64(n.ImageFs.InodesFree), Capacity: int64(n.ImageFs.Inodes)}
	}
	if n.MaxPID > 0 {
		o[PIDAvailable] = Observation{Available: int64(n.MaxPID) - int64(n.NumPIDs), Capacity: int64(n.MaxPID)}
	}
	return o
}

// met returns the thresholds met by o; with minReclaim, those not yet
// relieved by their minimum reclaim (thresholdsMet).
func met(ts []Threshold, o Observations, minReclaim bool) []Threshold {
	var out []Threshold
	for _, t := range ts {
		obs, ok := o[t.Signal]
		if !ok {
			continue
		}
		q := t.Value.Of(obs.Capacity)
		if minReclaim && t.MinReclaim != nil {
			q += t.MinReclaim.Of(obs.Capacity)
		}
		if q > obs.Available {
			out = append(out, t)
		}
	}
	return out
}

// Config is how the manager decides.
type Config struct {
	Thresholds []Threshold
	// PressureTransitionPeriod is how long a condition stays true after its
	// last threshold was met, and how long pressure must be gone before
	// evicted pods return (evictionPressureTransitionPeriod).
	PressureTransitionPeriod time.Duration
	// MaxPodGracePeriod caps the grace period of a pod evicted by a soft
	// threshold (evictionMaxPodGracePeriod); 0 or less = the pod's own.
	MaxPodGracePeriod time.Duration
}

// Manager keeps what the kubelet's eviction manager remembers between
// synchronizations. It is not safe for concurrent use.
type Manager struct {
	cfg Config
	// firstObserved is when each threshold met now was first met.
	firstObserved map[Threshold]time.Time
	// lastObserved is when each condition was last met.
	lastObserved map[v1.NodeConditionType]time.Time
	// since is when each condition became true (its lastTransitionTime).
	since map[v1.NodeConditionType]time.Time
	// metNow are the thresholds that met their grace period last time, kept
	// until their minimum reclaim is available.
	metNow     []Threshold
	conditions []v1.NodeConditionType
	clearSince time.Time // when every condition last became false
	started    time.Time
}

// New returns a manager for cfg, started now.
func New(cfg Config, now time.Time) *Manager {
	return &Manager{cfg: cfg, firstObserved: map[Threshold]time.Time{}, lastObserved: map[v1.NodeConditionType]time.Time{},
		since: map[v1.NodeConditionType]time.Time{}, started: now, clearSince: now}
}

// SetConfig replaces the manager's configuration (a reload). A
// threshold that stays as it was keeps when it was first met, so its grace
// period runs on; one that changed or is new starts afresh, and one that is
// gone no longer counts. Conditions are recomputed at the next
// Synchronize.
func (m *Manager) SetConfig(cfg Config) {
	m.cfg = cfg
	// Parse makes new quantities: thresholds are matched by what they say.
	same := func(t Threshold) (Threshold, bool) {
		for _, n := range cfg.Thresholds {
			if n.key() == t.key() {
				return n, true
			}
		}
		return Threshold{}, false
	}
	first := map[Threshold]time.Time{}
	for t, at := range m.firstObserved {
		if n, ok := same(t); ok {
			first[n] = at
		}
	}
	m.firstObserved = first
	var metNow []Threshold
	for _, t := range m.metNow {
		if n, ok := same(t); ok {
			metNow = append(metNow, n)
		}
	}
	m.metNow = metNow
}

// Thresholds are the manager's thresholds.
func (m *Manager) Thresholds() []Threshold { return m.cfg.Thresholds }

// Pressure is what one synchronization found.
type Pressure struct {
	// Conditions are the node conditions true now.
	Conditions []v1.NodeConditionType
	// Act are the thresholds met past their grace period, most urgent
	// first: the first one is to be relieved, by reclaim then eviction.
	Act []Threshold
	Observations
}

// Synchronize takes the signals observed at now and returns the conditions
// and the thresholds to act on (synchronize, up to ranking).
func (m *Manager) Synchronize(o Observations, now time.Time) Pressure {
	ts := met(m.cfg.Thresholds, o, false)
	for _, t := range met(m.metNow, o, true) {
		if !slices.Contains(ts, t) {
			ts = append(ts, t)
		}
	}
	first := map[Threshold]time.Time{}
	for _, t := range ts {
		at, ok := m.firstObserved[t]
		if !ok {
			at = now
		}
		first[t] = at
	}
	m.firstObserved = first
	for _, t := range ts {
		m.lastObserved[signalToCondition[t.Signal]] = now
	}
	var conds []v1.NodeConditionType
	for _, c := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
		if at, ok := m.lastObserved[c]; ok && now.Sub(at) < m.cfg.PressureTransitionPeriod || ok && at.Equal(now) {
			conds = append(conds, c)
			if !slices.Contains(m.conditions, c) {
				m.since[c] = now
			}
		} else if slices.Contains(m.conditions, c) {
			m.since[c] = now
		}
	}
	if len(conds) == 0 && len(m.conditions) > 0 {
		m.clearSince = now
	}
	m.conditions = conds
	var act []Threshold
	for t, at := range first {
		if now.Sub(at) >= t.GracePeriod {
			act = append(act, t)
		}
	}
	slices.SortFunc(act, func(a, b Threshold) int {
		if c := cmp.Compare(slices.Index(Signals, a.Signal), slices.Index(Signals, b.Signal)); c != 0 {
			return c
		}
		return cmp.Compare(a.String(), b.String())
	})
	m.metNow = act
	return Pressure{Conditions: conds, Act: act, Observations: o}
}

// Has reports whether condition c is true.
func (m *Manager) Has(c v1.NodeConditionType) bool { return slices.Contains(m.conditions, c) }

// Since is when condition c last changed (the kubelet's lastTransitionTime),
// or when the manager started.
func (m *Manager) Since(c v1.NodeConditionType) time.Time {
	if t, ok := m.since[c]; ok {
		return t
	}
	return m.started
}

// ClearFor reports whether no condition has been true for the pressure
// transition period as of now: evicted pods may return.
func (m *Manager) ClearFor(now time.Time) bool {
	return len(m.conditions) == 0 && now.Sub(m.clearSince) >= m.cfg.PressureTransitionPeriod
}

// Resource is what threshold t starves.
func Resource(t Threshold) v1.ResourceName { return signalToResource[t.Signal] }

// Candidate is a pod that may be evicted, with its usage.
type Candidate struct {
	Pod   *v1.Pod
	Stats *podspec.PodStats // nil: none found (evicted first, as the kubelet does)
}

// Eviction is the pod to evict and how.
type Eviction struct {
	Pod     *v1.Pod
	Message string
	Grace   time.Duration
}

// Pick ranks the candidates for threshold t as the kubelet does and returns
// the first that is not critical; false when there is none. A hard threshold
// gives the pod immediateGrace, a soft one the lower of the pod's grace and
// MaxPodGracePeriod.
func (m *Manager) Pick(t Threshold, p Pressure, cands []Candidate) (Eviction, bool) {
	cands = slices.DeleteFunc(slices.Clone(cands), func(c Candidate) bool { return Critical(c.Pod) })
	if len(cands) == 0 {
		return Eviction{}, false
	}
	Rank(t.Signal, cands)
	c := cands[0]
	grace := immediateGrace
	if t.Soft {
		grace = podGrace(c.Pod)
		if m.cfg.MaxPodGracePeriod > 0 {
			grace = min(grace, m.cfg.MaxPodGracePeriod)
		}
	}
	return Eviction{Pod: c.Pod, Message: message(t, p.Observations, c), Grace: grace}, true
}

func podGrace(pod *v1.Pod) time.Duration {
	if s := pod.Spec.TerminationGracePeriodSeconds; s != nil {
		return time.Duration(*s) * time.Second
	}
	return 30 * time.Second
}

// Rank orders cands for eviction on signal s, first to go first: memory by
// usage above requests, priority, usage less request (rankMemoryPressure);
// pids by priority then count (rankPIDPressure); disk by usage above
// ephemeral-storage requests, priority, usage (rankDiskPressureFunc).
func Rank(s Signal, cands []Candidate) {
	var by []func(a, b Candidate) int
	switch signalToResource[s] {
	case v1.ResourceMemory:
		by = []func(a, b Candidate) int{exceeds(v1.ResourceMemory), priority, usage(v1.ResourceMemory)}
	case resourcePids:
		by = []func(a, b Candidate) int{priority, usage(resourcePids)}
	default:
		by = []func(a, b Candidate) int{exceeds(v1.ResourceEphemeralStorage), priority, usage(v1.ResourceEphemeralStorage)}
	}
	slices.SortStableFunc(cands, func(a, b Candidate) int {
		for _, f := range by {
			if c := f(a, b); c != 0 {
				return c
			}
		}
		return 0
	})
}

// used is a candidate's usage of r; false without stats.
func used(c Candidate, r v1.ResourceName) (int64, bool) {
	if c.Stats == nil {
		return 0, false
	}
	switch r {
	case v1.ResourceMemory:
		return int64(c.Stats.MemoryWorkingSet), true
	case resourcePids:
		return int64(c.Stats.Pids), true
	}
	var n uint64
	for _, cs := range c.Stats.Containers {
		n += cs.RootfsBytes + cs.LogsBytes
	}
	return int64(n), true
}

// request is the pod's request of r: the sum of its containers' or the
// largest of its init containers', whichever is more.
func request(pod *v1.Pod, r v1.ResourceName) int64 {
	var sum, init int64
	for _, c := range pod.Spec.Containers {
		q := c.Resources.Requests[r]
		sum += q.Value()
	}
	for _, c := range pod.Spec.InitContainers {
		q := c.Resources.Requests[r]
		init = max(init, q.Value())
	}
	return max(sum, init)
}

// exceeds puts first the pods whose usage is above their request, and pods
// without stats before all.
func exceeds(r v1.ResourceName) func(a, b Candidate) int {
	return func(a, b Candidate) int {
		ua, oka := used(a, r)
		ub, okb := used(b, r)
		if !oka || !okb {
			return cmpBool(!oka, !okb)
		}
		return cmpBool(ua > request(a.Pod, r), ub > request(b.Pod, r))
	}
}

// priority puts lower priorities first.
func priority(a, b Candidate) int { return cmp.Compare(Priority(a.Pod), Priority(b.Pod)) }

// usage puts the larger consumers relative to their request first (pids:
// the larger count).
func usage(r v1.ResourceName) func(a, b Candidate) int {
	return func(a, b Candidate) int {
		ua, oka := used(a, r)
		ub, okb := used(b, r)
		if !oka || !okb {
			return cmpBool(!oka, !okb)
		}
		if r != resourcePids {
			ua -= request(a.Pod, r)
			ub -= request(b.Pod, r)
		}
		return cmp.Compare(ub, ua)
	}
}

// cmpBool puts true first.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// message is the kubelet's evictionMessage: the resource, the threshold and
// what was available, and each container using more than it requested.
func message(t Threshold, o Observations, c Candidate) string {
	r := signalToResource[t.Signal]
	msg := fmt.Sprintf(nodeLowMessageFmt, r)
	if obs, ok := o[t.Signal]; ok {
		msg += fmt.Sprintf(thresholdMetMessageFmt, quantity(t.Value.Of(obs.Capacity), r), quantity(obs.Available, r))
	}
	if c.Stats == nil || (r != v1.ResourceMemory && r != v1.ResourceEphemeralStorage) {
		return msg
	}
	for _, cs := range c.Stats.Containers {
		for _, ctr := range append(slices.Clone(c.Pod.Spec.Containers), c.Pod.Spec.InitContainers...) {
			if ctr.Name != cs.Name {
				continue
			}
			req := ctr.Resources.Requests[r]
			use := int64(cs.MemoryWorkingSet)
			if r == v1.ResourceEphemeralStorage {
				use = int64(cs.RootfsBytes + cs.LogsBytes)
			}
			if u := resource.NewQuantity(use, resource.BinarySI); u.Cmp(req) > 0 {
				msg += fmt.Sprintf(containerMessageFmt, ctr.Name, u.String(), req.String(), r)
			}
			break
		}
	}
	return msg
}

func quantity(n int64, r v1.ResourceName) *resource.Quantity {
	if r == resourcePids || r == resourceInodes {
		return resource.NewQuantity(n, resource.DecimalSI)
	}
	return resource.NewQuantity(n, resource.BinarySI)
}

// ConditionMessage is the kubelet's message for a pod refused under pressure.
func ConditionMessage(c []v1.NodeConditionType) string {
	return fmt.Sprintf(nodeConditionMessageFmt, c)
}

// Admit is the kubelet's admission under pressure (managerImpl.Admit): with no
// condition every pod is admitted; critical pods always are; under memory
// pressure alone every pod but a BestEffort one; under disk or PID pressure
// none. A refused pod fails with Reason and the message.
func (m *Manager) Admit(pod *v1.Pod, qos v1.PodQOSClass) (bool, string) {
	if len(m.conditions) == 0 || Critical(pod) {
		return true, ""
	}
	if len(m.conditions) == 1 && m.conditions[0] == v1.NodeMemoryPressure &&
		(qos != v1.PodQOSBestEffort || toleratesMemoryPressure(pod)) {
		return true, ""
	}
	return false, ConditionMessage(m.conditions)
}

// toleratesMemoryPressure reports whether pod tolerates the NoSchedule taint
// node.kubernetes.io/memory-pressure, which admits a BestEffort pod under
// memory pressure.
func toleratesMemoryPressure(pod *v1.Pod) bool {
	for _, t := range pod.Spec.Tolerations {
		if (t.Effect == "" || t.Effect == v1.TaintEffectNoSchedule) &&
			(t.Key == "" && t.Operator == v1.TolerationOpExists || t.Key == v1.TaintNodeMemoryPressure &&
				(t.Operator == v1.TolerationOpExists || t.Value == "")) {
			return true
		}
	}
	return false
}

// Relieved reports whether threshold t, with its minimum reclaim, is no
// longer met by o: node-level reclaim was enough.
func Relieved(t Threshold, o Observations) bool { return len(met([]Threshold{t}, o, true)) == 0 }
