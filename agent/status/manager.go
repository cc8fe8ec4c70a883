package status

import (
	"cmp"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
)

// Manager is the one owner of the published pod status, the kubelet's
// status manager for a node with no API server of its own to write to: a
// cache of each pod's status by UID, under the key of its worker with the
// version of the key's last change, that every reader reads (/pods, the
// mirror, run --once, --ready-when, the systemd STATUS line), and one
// subscription they all hear it change by.
//
// The pods are kept by key, the worker that shows them (a full name
// namespace/name, or a worker's own key for an orphan): the desired pod
// with its live status, and the older generations it still stops,
// Terminating. A pod in the cache is never changed in place: Update replaces
// it, so a reader may keep what Desired returns without a copy, and must not
// change it.
//
// Update refuses an illegal transition, as the kubelet's
// checkContainerStateTransition: a container instance that has terminated
// never turns back to running. A static pod's containers leave the
// terminated state by being made again, with a new ID (a pod whose eviction
// is lifted starts again whatever its restartPolicy), so the rule is by
// container ID, not by name and restartPolicy as the kubelet's. A refused
// pod keeps its cached status, and the refusal is logged, as the kubelet's
// "Status update on pod aborted".
type Manager struct {
	node   string // the suffix of static pod names, which the STATUS line drops
	logger *slog.Logger

	mu      sync.Mutex // guards the fields below; taken last: nothing run under it takes a lock
	version uint64     // of the last change, of any key
	keys    map[string]*entry
	// removed are the keys removed since a subscriber last looked, with the
	// version of their removal.
	removed map[string]uint64
	changed chan struct{} // closed at the next change; nil: none asked for since the last
	watches map[*Watch]bool
	// sum is the sum of the entries' tallies; waiting holds, by key, the
	// waiting pods' names of each.
	sum     tally
	waiting map[string][]string
}

// entry is what one key shows.
type entry struct {
	// version is the Manager's at the last change of what the key shows
	// (the kubelet's versionedPodStatus, by key).
	version uint64
	desired string             // UID of the desired pod; "" for none
	pods    map[string]*v1.Pod // by UID: the desired pod and the older generations
	tally   tally
}

// NewManager returns an empty Manager for the node named node.
func NewManager(node string, logger *slog.Logger) *Manager {
	return &Manager{
		node: node, logger: logger,
		keys: map[string]*entry{}, removed: map[string]uint64{}, watches: map[*Watch]bool{},
		waiting: map[string][]string{},
	}
}

// Desired is the desired pod of key with its status, nil for none. It is
// the cache's: read it, do not change it.
func (m *Manager) Desired(key string) *v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.keys[key]; e != nil {
		return e.pods[e.desired]
	}
	return nil
}

// Stopping is the older generation of UID uid that key still stops, nil for
// none. It is the cache's: read it, do not change it.
func (m *Manager) Stopping(key, uid string) *v1.Pod {
	m.mu.Lock()
	defer m.mu.Unlock()
	if e := m.keys[key]; e != nil && uid != e.desired {
		return e.pods[uid]
	}
	return nil
}

// Update replaces what key shows with what f returns, given what it shows
// now: the desired pod (nil: none) and the older generations by UID, which
// f may keep but not change (it returns a new pod for one that changed).
// Each pod is checked against its cached status; one that makes an illegal
// transition keeps its cached status. f runs with the Manager locked: it may
// not call the Manager.
func (m *Manager) Update(key string, f func(desired *v1.Pod, stopping map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	old := m.keys[key]
	var desired *v1.Pod
	stopping := map[string]*v1.Pod{}
	if old != nil {
		for uid, p := range old.pods {
			if uid == old.desired {
				desired = p
			} else {
				stopping[uid] = p
			}
		}
	}
	desired, stopping = f(desired, stopping)
	if old.same(desired, stopping) {
		// The same pods (a resync that changed nothing): a change all the
		// same, as before, without counting them again.
		m.changedLocked(key, old)
		return
	}
	e := &entry{pods: make(map[string]*v1.Pod, len(stopping)+1)}
	put := func(uid string, p *v1.Pod) {
		if prev := old.pod(uid); prev != nil && prev != p {
			if err := checkTransition(prev, p); err != nil {
				m.logger.Error("Status update on pod aborted", "pod", key, "uid", uid, "err", err)
				p = prev
			}
		}
		e.pods[uid] = p
	}
	for uid, p := range stopping {
		put(uid, p)
	}
	if desired != nil {
		e.desired = string(desired.UID)
		put(e.desired, desired)
	}
	m.setLocked(key, e)
}

// same reports whether e shows desired and stopping, the same pods.
func (e *entry) same(desired *v1.Pod, stopping map[string]*v1.Pod) bool {
	if e == nil || desired == nil || e.desired != string(desired.UID) || e.pods[e.desired] != desired || len(e.pods) != len(stopping)+1 {
		return false
	}
	for uid, p := range stopping {
		if uid == e.desired || e.pods[uid] != p {
			return false
		}
	}
	return true
}

// pod is e's pod of UID uid; nil for none, or when e is nil.
func (e *entry) pod(uid string) *v1.Pod {
	if e == nil {
		return nil
	}
	return e.pods[uid]
}

// Remove forgets key: its worker is gone.
func (m *Manager) Remove(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.setLocked(key, nil)
}

// setLocked makes e (nil: nothing) what key shows, counts its pods again and
// tells the subscribers.
func (m *Manager) setLocked(key string, e *entry) {
	if old := m.keys[key]; old != nil {
		m.sum.addCounts(old.tally, -1)
	}
	delete(m.keys, key)
	delete(m.waiting, key)
	if e != nil {
		for _, p := range e.pods {
			e.tally.add(p, m.node)
		}
		m.keys[key] = e
		m.sum.addCounts(e.tally, 1)
		if len(e.tally.waiting) > 0 {
			m.waiting[key] = e.tally.waiting
		}
	}
	m.changedLocked(key, e)
}

// changedLocked tells the subscribers that key changed, to show e (nil:
// nothing), which is counted already.
func (m *Manager) changedLocked(key string, e *entry) {
	m.version++
	if e != nil {
		e.version = m.version
	}
	m.touchLocked()
	if e == nil && len(m.watches) > 0 {
		m.removed[key] = m.version // until every subscriber has seen it gone
	} else {
		delete(m.removed, key)
	}
	for w := range m.watches {
		w.notify(key)
	}
}

// Touch tells the subscribers of Changed that something they read with the
// pods changed: the manifest problems, the node's conditions.
func (m *Manager) Touch() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.touchLocked()
}

func (m *Manager) touchLocked() {
	// Made by Changed only, when asked for: a change nobody waits for
	// (each resync at rest) makes none.
	if m.changed != nil {
		close(m.changed)
		m.changed = nil
	}
}

// Changed returns a channel that is closed at the next change: subscribers
// read the pods then, instead of polling them.
func (m *Manager) Changed() <-chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.changed == nil {
		m.changed = make(chan struct{})
	}
	return m.changed
}

// Pods returns a copy of every pod, sorted by full name; of pods with one
// name, those terminating come first, then by UID.
func (m *Manager) Pods() []v1.Pod {
	shown := m.sorted()
	if len(shown) == 0 {
		return nil
	}
	pods := make([]v1.Pod, len(shown))
	for i, p := range shown {
		p.DeepCopyInto(&pods[i])
	}
	return pods
}

// Figures calls f with what the metrics read of each pod (Figures.Read), in
// the order of Pods, without a copy of any pod. fig is f's only while it
// runs: the next pod's figures are read into it. f runs with the Manager
// unlocked.
func (m *Manager) Figures(f func(fig *Figures)) {
	var fig Figures
	for _, p := range m.sorted() {
		fig.Read(p)
		f(&fig)
	}
}

// sorted lists the cached pods in the order of Pods. They are the cache's,
// which no one changes (Update replaces a pod), so they are read after the
// Manager is unlocked; they must not be changed.
func (m *Manager) sorted() []*v1.Pod {
	m.mu.Lock()
	n := 0
	for _, e := range m.keys {
		n += len(e.pods)
	}
	pods := make([]*v1.Pod, 0, n)
	for _, e := range m.keys {
		for _, p := range e.pods {
			pods = append(pods, p)
		}
	}
	m.mu.Unlock()
	slices.SortStableFunc(pods, comparePods)
	return pods
}

// comparePods orders x and y by full name; of pods with one name, those
// terminating come first, then by UID.
func comparePods(x, y *v1.Pod) int {
	if c := compareFullNames(x.Namespace, x.Name, y.Namespace, y.Name); c != 0 {
		return c
	}
	switch tx, ty := x.DeletionTimestamp, y.DeletionTimestamp; {
	case tx != nil && ty == nil:
		return -1
	case tx == nil && ty != nil:
		return 1
	}
	return strings.Compare(string(x.UID), string(y.UID))
}

// compareFullNames is strings.Compare(ns1+"/"+n1, ns2+"/"+n2), without
// making either string.
func compareFullNames(ns1, n1, ns2, n2 string) int {
	l1, l2 := len(ns1)+1+len(n1), len(ns2)+1+len(n2)
	at := func(ns, n string, i int) byte {
		switch {
		case i < len(ns):
			return ns[i]
		case i == len(ns):
			return '/'
		}
		return n[i-len(ns)-1]
	}
	i := 0
	if ns1 == ns2 {
		i = len(ns1) + 1 // the same up to the slash
	}
	for ; i < min(l1, l2); i++ {
		if b1, b2 := at(ns1, n1, i), at(ns2, n2, i); b1 != b2 {
			if b1 < b2 {
				return -1
			}
			return 1
		}
	}
	return cmp.Compare(l1, l2)
}

// Line is the systemd STATUS line of the pods, with problems manifest
// problems: "3 pods: 2 running, 1 waiting (etcd: CrashLoopBackOff)". It
// costs the number of waiting pods, not of all pods.
func (m *Manager) Line(problems int) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var waiting []string
	for _, names := range m.waiting {
		waiting = append(waiting, names...)
	}
	slices.Sort(waiting)
	return m.sum.line(waiting, problems)
}

// checkTransition is the kubelet's checkContainerStateTransition by
// container instance: no container that had terminated in old runs in p.
func checkTransition(old, p *v1.Pod) error {
	if old == nil || p == nil {
		return nil
	}
	ended := map[string]bool{}
	for _, list := range [][]v1.ContainerStatus{old.Status.InitContainerStatuses, old.Status.ContainerStatuses} {
		for _, cs := range list {
			if t := cs.State.Terminated; t != nil && cs.ContainerID != "" {
				ended[cs.ContainerID] = true
			}
		}
	}
	if len(ended) == 0 {
		return nil
	}
	for _, list := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.State.Running != nil && ended[cs.ContainerID] {
				return fmt.Errorf("terminated container %s (%s) attempted illegal transition to running", cs.Name, cs.ContainerID)
			}
		}
	}
	return nil
}

// Watch hears which pods changed: it asks the Manager for the keys changed
// after the version it last saw, and its channel tells when there are some.
// Changes between two calls of Next coalesce, and the Manager never waits
// for a subscriber. It tells which keys changed, not what they show: the
// subscriber reads that from the cache when it acts on them (Desired), as
// the kubelet's status manager reads its cache at sync time, so it never
// acts on a status older than the cache's; what it reads is the cache's own
// pod, shared (Shared), not a copy.
type Watch struct {
	m    *Manager
	ch   chan struct{} // one slot: something changed
	keep func(key string) bool

	// Guarded by m.mu.
	seen    uint64          // the Manager's version at the last Next
	initial map[string]bool // keys the first Next lists whatever their version
}

// Watch subscribes to the changes of the keys keep accepts from now on, the
// first Next listing those of initial too, changed or not: the keys the
// subscriber should know from the start. Close it when done.
func (m *Manager) Watch(initial []string, keep func(key string) bool) *Watch {
	w := &Watch{m: m, ch: make(chan struct{}, 1), keep: keep, initial: map[string]bool{}}
	for _, k := range initial {
		w.initial[k] = true
	}
	w.ch <- struct{}{}
	m.mu.Lock()
	defer m.mu.Unlock()
	w.seen = m.version
	m.watches[w] = true
	return w
}

// C receives when pods changed since the last Next.
func (w *Watch) C() <-chan struct{} { return w.ch }

// Next returns the keys changed since the last call, removed ones
// included; a key changed several times appears once.
func (w *Watch) Next() []string {
	m := w.m
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for key, e := range m.keys {
		if (e.version > w.seen || w.initial[key]) && w.keep(key) {
			out = append(out, key)
		}
		delete(w.initial, key)
	}
	for key, v := range m.removed {
		if (v > w.seen || w.initial[key]) && w.keep(key) {
			out = append(out, key)
		}
		delete(w.initial, key)
	}
	for key := range w.initial {
		// Known to the subscriber, nothing published yet.
		out = append(out, key)
	}
	w.initial = nil
	w.seen = m.version
	m.pruneLocked()
	return out
}

// Desired is what key shows now, of the keys w keeps: its desired pod with
// its status, the zero Shared for none. It is the Manager's own pod, not a
// copy: a resync that changed nothing costs the subscriber no copy, and the
// pod shown again is Same as the one shown before.
func (w *Watch) Desired(key string) Shared {
	if !w.keep(key) {
		return Shared{}
	}
	return Share(w.m.Desired(key))
}

// Stopping is what key shows now of the older generations it still stops,
// of the keys w keeps, in no order: the Manager's own pods, as Desired's.
func (w *Watch) Stopping(key string) []Shared {
	if !w.keep(key) {
		return nil
	}
	m := w.m
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.keys[key]
	if e == nil {
		return nil
	}
	var out []Shared
	for uid, p := range e.pods {
		if uid != e.desired {
			out = append(out, Share(p))
		}
	}
	return out
}

// Keys lists the keys w keeps that show a desired pod now.
func (w *Watch) Keys() []string {
	m := w.m
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for key, e := range m.keys {
		if e.desired != "" && w.keep(key) {
			out = append(out, key)
		}
	}
	return out
}

// Close ends the subscription.
func (w *Watch) Close() {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	delete(w.m.watches, w)
	w.m.pruneLocked()
}

// notify tells w that key changed; m.mu held.
func (w *Watch) notify(key string) {
	if !w.keep(key) {
		return
	}
	select {
	case w.ch <- struct{}{}:
	default:
	}
}

// pruneLocked forgets the removed keys every subscriber has seen gone.
func (m *Manager) pruneLocked() {
	for key, v := range m.removed {
		seen := true
		for w := range m.watches {
			seen = seen && w.seen >= v
		}
		if seen {
			delete(m.removed, key)
		}
	}
}
