// Package mirror keeps the static pods visible on an API server the way the
// kubelet does: a mirror pod per static pod with its live status, the Node
// with its status, its Lease in kube-node-lease, and the pods' events. It is
// the only package that imports client-go. Nothing here ever waits on the
// agent or holds up a pod: the API server may be absent, slow or failing, and
// local pods run all the same; reconciliation catches up when it answers.
package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/status"
)

// Pods is what the mirror needs of the agent.
type Pods interface {
	// Watch subscribes to changes of the static pods (agent.Agent.Watch).
	Watch() Watch
	// Events are what happened to them, kept and to come.
	Events() *events.Recorder
}

// Watch is a subscription to the static pods' changes, and the way to
// read them; *agent.PodWatch implements it.
type Watch interface {
	C() <-chan struct{}
	// Next returns the full names namespace/name of the pods changed since
	// it was last called.
	Next() []string
	// Desired is the static pod of a full name with its live status as the
	// status manager has it now, the zero Shared for none. It is the status
	// manager's own pod, shared with every reader: the mirror reads it
	// through Shared's methods, which change nothing, and copies it (Copy)
	// to make a mirror pod of it. Since it never changes, the mirror may
	// keep it, and one it kept that is Same is the same status.
	Desired(name string) status.Shared
	// Stopping are the older generations of a full name that are still
	// being stopped (a removed or replaced static pod in its grace period),
	// with their live status: shared, as Desired's.
	Stopping(name string) []status.Shared
	// Keys are the full names of the static pods there are now.
	Keys() []string
	// Synced is true once the agent has every source's pods: before, a
	// mirror pod without a static pod is not taken for an orphan, so that a
	// restarted daemon does not delete and make again every mirror pod.
	Synced() bool
	Close()
}

// AgentPods is the agent as the mirror sees it.
type AgentPods struct{ *agent.Agent }

func (a AgentPods) Watch() Watch { return a.Agent.Watch() }

// NodeConditions gives the node's pressure conditions (MemoryPressure,
// DiskPressure, PIDPressure); the eviction manager implements it. Without
// one each is reported False.
type NodeConditions interface {
	PressureConditions() []v1.NodeCondition
}

// Config is how the mirror reaches the API server and what it says there.
type Config struct {
	// Credentials are the node's: its kubeconfig, or the client
	// certificate TLS bootstrap and rotation keep (the kubelet's
	// --kubeconfig, --bootstrap-kubeconfig, rotateCertificates).
	Credentials *Credentials
	NodeName    string
	NodeIP      netip.Addr // the node's InternalIP; none when invalid
	Hostname    string     // the node's Hostname address; default NodeName
	// KubeletPort is the node API's port, the Node's
	// status.daemonEndpoints.kubeletEndpoint.port: where the API server
	// sends kubectl logs and nodes/proxy requests.
	KubeletPort int32
	// Version is staticpodd's: containerRuntimeVersion staticpodd://<Version>.
	Version string
	// RegisterNode creates the Node when it is missing (registerNode).
	RegisterNode bool
	// RegisterSchedulable registers the Node schedulable and does not
	// cordon it again (--register-schedulable); by default it is
	// unschedulable.
	RegisterSchedulable bool
	// RegisterWithTaints are the taints a registered Node starts with.
	RegisterWithTaints []v1.Taint
	// NodeLabels are labels a registered Node starts with, over the
	// default ones (--node-labels).
	NodeLabels map[string]string
	// NodeStatusUpdateFrequency is how often the Node's status is computed
	// and, when it changed, posted (default 10s); NodeStatusReportFrequency
	// is how often it is posted even unchanged (default 5m).
	NodeStatusUpdateFrequency time.Duration
	NodeStatusReportFrequency time.Duration
	// NodeLeaseDuration is the Lease's leaseDurationSeconds (default 40s);
	// it is renewed every quarter of it, as the kubelet does.
	NodeLeaseDuration time.Duration
	MaxPods           int64
	RootDir           string            // ephemeral-storage capacity is its filesystem's size
	EvictionHard      map[string]string // subtracted from capacity into allocatable
	Conditions        NodeConditions    // nil: no pressure
	// OnChange is called when Status changes; nil: nothing.
	OnChange func()
}

// Mirror is the mirror-pod client. Make it with New and run it with Run.
type Mirror struct {
	cfg    Config
	pods   Pods
	logger *slog.Logger
	// newClient makes the clientsets; tests replace it with a fake.
	newClient func() (clients, error)

	healthMu sync.Mutex // guards health
	health   map[string]problem

	nodeMu  sync.Mutex // guards node, nodeSet and nodeWatched
	node    *v1.Node   // the Node as last read, written or watched; nil until then
	nodeSet chan struct{}
	// nodeWatched: a watch of the Node runs, and keeps node current.
	nodeWatched bool

	podsMu sync.Mutex // guards sync
	sync   *podSync   // nil until Run made it

	// apiPodEvents are the events about the API server's pods the
	// rejecter failed, which runEvents posts: not kept in the agent's
	// ring, which a flood of them would empty of the static pods' events.
	// Full, one is dropped, as the broadcaster drops.
	apiPodEvents chan v1.Event

	// evictionHard is cfg.EvictionHard, or what a reload set since.
	evictionHard atomic.Pointer[map[string]string]
}

// SetEvictionHard changes the thresholds subtracted from capacity into the
// Node's allocatable (a reload); the next Node status update shows it.
func (m *Mirror) SetEvictionHard(t map[string]string) {
	m.evictionHard.Store(&t)
}

func (m *Mirror) evictionHardNow() map[string]string {
	if t := m.evictionHard.Load(); t != nil {
		return *t
	}
	return m.cfg.EvictionHard
}

type problem struct {
	err    error
	since  time.Time
	logged time.Time // when its failure was last logged
}

// failureLogEvery is how often a part that stays failing with changing
// errors (each request's own URL, say) is logged again: a failure is logged
// when it starts, and its later errors at most this often.
const failureLogEvery = time.Minute

// New returns a mirror client; it dials nothing until Run.
func New(cfg Config, pods Pods, logger *slog.Logger) *Mirror {
	if cfg.Hostname == "" {
		cfg.Hostname = cfg.NodeName
	}
	if cfg.NodeStatusUpdateFrequency <= 0 {
		cfg.NodeStatusUpdateFrequency = 10 * time.Second
	}
	if cfg.NodeStatusReportFrequency <= 0 {
		cfg.NodeStatusReportFrequency = 5 * time.Minute
	}
	if cfg.NodeLeaseDuration <= 0 {
		cfg.NodeLeaseDuration = 40 * time.Second
	}
	if cfg.MaxPods <= 0 {
		cfg.MaxPods = 110
	}
	m := &Mirror{cfg: cfg, pods: pods, logger: logger, health: map[string]problem{}, nodeSet: make(chan struct{}),
		apiPodEvents: make(chan v1.Event, rejectBurst)}
	m.newClient = m.kubeconfigClient
	if cfg.Credentials != nil {
		cfg.Credentials.setReport(m.report)
	}
	return m
}

// clients are the API server's: one for requests, one for the watch, which
// the requests' timeout would cut.
type clients struct {
	api, watch api
}

// kubeconfigClient makes the clients of the credentials, each time anew
// until it works: kubeadm may write the kubeconfig after staticpodd started.
func (m *Mirror) kubeconfigClient() (clients, error) {
	rc, err := m.cfg.Credentials.RESTConfig()
	if err != nil {
		return clients{}, err
	}
	watch, err := newRESTAPI(rc)
	if err != nil {
		return clients{}, err
	}
	// No request outlives a slow server for long.
	rc.Timeout = requestTimeout
	requests, err := newRESTAPI(rc)
	if err != nil {
		return clients{}, err
	}
	return clients{api: requests, watch: watch}, nil
}

// requestTimeout bounds every request but the pod watch.
const requestTimeout = 10 * time.Second

// Run keeps the mirror pods, the Node, its Lease and the events until ctx
// ends. It returns nil then; trouble on the way is logged, retried with
// back-off and shown by Status, never returned.
func (m *Mirror) Run(ctx context.Context) error {
	quietKlog(m.logger.With("from", "client-go"))
	if m.cfg.Credentials != nil {
		// The certificate manager and the transport's watch of it end
		// with the mirror, the daemon's one long-lived client.
		defer m.cfg.Credentials.Close()
	}
	var cs clients
	bo := newBackoff(200*time.Millisecond, 10*time.Second)
	for {
		c, err := m.newClient()
		if err == nil {
			cs = c
			break
		}
		m.report("kubeconfig", err)
		if !sleep(ctx, bo.next()) {
			return nil
		}
	}
	m.report("kubeconfig", nil)
	pw := m.pods.Watch()
	defer pw.Close()
	client := cs.api
	ps := newPodSync(m, pw, client, cs.watch)
	m.podsMu.Lock()
	m.sync = ps
	m.podsMu.Unlock()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { m.watchNode(ctx, cs.watch) })
	wg.Go(func() { m.runNode(ctx, client) })
	wg.Go(func() { m.runLease(ctx, client) })
	wg.Go(func() { ps.run(ctx) })
	wg.Go(func() { m.runEvents(ctx, client) })
	<-ctx.Done()
	return nil
}

// Status is a nil error while every part works, else what fails, and since
// when (the earliest failure).
func (m *Mirror) Status() (time.Time, error) {
	m.healthMu.Lock()
	defer m.healthMu.Unlock()
	if len(m.health) == 0 {
		return time.Time{}, nil
	}
	parts := make([]string, 0, len(m.health))
	for part := range m.health {
		parts = append(parts, part)
	}
	sort.Strings(parts)
	var errs []error
	var since time.Time
	for _, part := range parts {
		p := m.health[part]
		errs = append(errs, fmt.Errorf("%s: %w", part, p.err))
		if since.IsZero() || p.since.Before(since) {
			since = p.since
		}
	}
	return since, errors.Join(errs...)
}

// report records how part did, and tells OnChange of a change of health or
// error. A failure is logged when it starts, a changed error of a part still
// failing at most every failureLogEvery, a recovery once.
func (m *Mirror) report(part string, err error) {
	m.healthMu.Lock()
	prev, failing := m.health[part]
	changed, log := false, false
	now := time.Now()
	switch {
	case err == nil && failing:
		delete(m.health, part)
		changed, log = true, true
	case err != nil && (!failing || prev.err.Error() != err.Error()):
		p := problem{err: err, since: now, logged: now}
		if failing {
			p.since, p.logged = prev.since, prev.logged
		}
		log = !failing || now.Sub(prev.logged) >= failureLogEvery
		if log {
			p.logged = now
		}
		m.health[part] = p
		changed = true
	}
	m.healthMu.Unlock()
	if !changed {
		return
	}
	if err != nil {
		if log {
			m.logger.Warn("API server: failing; retrying", "part", part, "err", err)
		}
	} else {
		m.logger.Info("API server: working again", "part", part)
	}
	if m.cfg.OnChange != nil {
		m.cfg.OnChange()
	}
}

// backoff is exponential with ±25% jitter, so that many nodes coming back
// together do not knock at once.
type backoff struct {
	base, max, cur time.Duration
}

func newBackoff(base, max time.Duration) *backoff { return &backoff{base: base, max: max} }

func (b *backoff) next() time.Duration {
	if b.cur == 0 {
		b.cur = b.base
	} else {
		b.cur = min(b.cur*2, b.max)
	}
	return jitter(b.cur)
}

func (b *backoff) reset() { b.cur = 0 }

func jitter(d time.Duration) time.Duration {
	return time.Duration(float64(d) * (0.75 + rand.Float64()/2))
}

// sleep waits d or until ctx ends; false when it ended.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// oneLine keeps an API error readable in STATUS=.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// activeStaticPods counts the static pods that are neither Succeeded nor
// Failed: the pods the scheduler counts on this node, their mirror pods.
func (m *Mirror) activeStaticPods() int64 {
	m.podsMu.Lock()
	ps := m.sync
	m.podsMu.Unlock()
	if ps == nil {
		return 0
	}
	var n int64
	for _, key := range ps.pods.Keys() {
		if p := ps.pods.Desired(key); !p.IsZero() && !terminal(p.Phase()) {
			n++
		}
	}
	return n
}

// mirrorUID is the UID of the mirror pod of static pod namespace/name with
// UID staticUID; "" when none is known.
func (m *Mirror) mirrorUID(namespace, name, staticUID string) types.UID {
	m.podsMu.Lock()
	ps := m.sync
	m.podsMu.Unlock()
	if ps == nil {
		return ""
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if p := ps.mirrors[namespace+"/"+name]; p != nil && p.Annotations[manifest.AnnotationHash] == staticUID {
		return p.UID
	}
	return ""
}
