// Package agent turns the static pods sources deliver into running containers:
// it merges the sources, plans desired against actual per pod, runs one worker per
// pod, applies the kubelet's restart back-off and keeps each pod's v1.PodStatus.
package agent

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/eviction"
	"github.com/staticpodd/staticpodd/agent/hostfiles"
	"github.com/staticpodd/staticpodd/agent/images"
	"github.com/staticpodd/staticpodd/agent/lifecycle"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
	"github.com/staticpodd/staticpodd/agent/poddir"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
	"github.com/staticpodd/staticpodd/agent/prober"
	"github.com/staticpodd/staticpodd/agent/status"
	"github.com/staticpodd/staticpodd/agent/volumes"
)

// Notifier hears how the agent is doing; sysd implements it for systemd.
type Notifier interface {
	Ready()        // once, after every source's first snapshot and the first reconcile
	Status(string) // a one-line summary, each time it changes
	Watchdog()     // the reconcile loop is alive
}

type nopNotifier struct{}

func (nopNotifier) Ready()        {}
func (nopNotifier) Status(string) {}
func (nopNotifier) Watchdog()     {}

// Config is how the agent runs pods.
type Config struct {
	NodeName string
	NodeIP   netip.Addr // hostIP of every pod, podIP of hostNetwork pods
	// Sources must each deliver a first update before the agent is ready and
	// removes containers of pods it does not know (manifest.SourceFile, ...).
	Sources []string
	Paths   manifest.Paths
	// SyncFrequency re-syncs every pod (retrying missing images); default 1m.
	SyncFrequency time.Duration
	// RelistPeriod is how often the pods' restart-on-change files are read
	// again, whatever inotify says (fileCheckFrequency, as for manifests);
	// default 20s.
	RelistPeriod time.Duration
	// BackoffMax caps the crash-loop back-off; default 5m.
	BackoffMax time.Duration
	// PodPidsLimit caps each pod's processes (the kubelet's podPidsLimit);
	// 0 or -1 = no limit.
	PodPidsLimit int64
	// ResolvConf is the resolver file pods' /etc/resolv.conf is made from
	// (the kubelet's resolvConf); "" gives them a local resolver.
	ResolvConf string
	// WatchdogPeriod is how often the reconcile loop pings Notifier.Watchdog when
	// idle; at most half of systemd's WatchdogSec. 0: no systemd watchdog,
	// and the loop wakes for no ping: an idle daemon's every wake-up costs
	// (docs/benchmarks.md, Idle wake-ups).
	WatchdogPeriod time.Duration
	Notifier       Notifier // default: does nothing
	// Seen records the config.seen time and status.startTime of each pod
	// whose sandbox is made, for the file source and the agent to find after
	// a restart; nil keeps them in memory only.
	Seen *SeenStore
	// Events is where the agent records what happens to pods; default: a
	// recorder of events.DefaultCapacity for NodeName, logging to the logger.
	Events *events.Recorder
	// Eviction is how node pressure is relieved; no thresholds: never.
	Eviction EvictionConfig
	// Images pulls the images of containers as their imagePullPolicy says;
	// nil: nothing is pulled, a missing image waits with ErrImageNeverPull.
	Images images.Puller
	// Tags resolves the tags of the pods that follow them
	// (manifest.AnnotationFollowTags); nil: no tag is followed.
	Tags TagResolver
}

// Agent runs static pods on a Runtime.
type Agent struct {
	cfg         Config
	rt          Runtime
	sharedStats sharedStats // StatsSummary's
	conv        converter
	// objects are the ConfigMaps and Secrets of every source, merged
	// (mergeObjects); each reconcile stores a new Set.
	objects atomic.Pointer[objects.Set]
	marks   lifecycle.Marks
	// probeMarks keep what running containers' probes said for the next daemon.
	probeMarks prober.Marks
	// statuses is the one owner of the pods' published status: what Pods,
	// Watch, Changed and the STATUS line read.
	statuses *status.Manager
	// probeCounts count every probe made, by result, for /metrics/probes.
	probeCounts prober.Counts
	// timings are the kubelet's pod start and pod worker histograms.
	timings timings
	logger  *slog.Logger
	events  *events.Recorder
	resync  chan struct{}
	ready   sync.Once

	resyncMu sync.Mutex // guards resynced
	// resynced is closed, and replaced, at each Resync: a pull of an image
	// that an import brought meanwhile is given up.
	resynced chan struct{}

	// reconciled is closed by the first full reconcile: from then on every
	// pod found running is owned by a worker (StopPod waits for it).
	reconciled chan struct{}
	// listing is closed once every pod of the first full reconcile is
	// published (Listed).
	listing *listing

	// started is when the agent was made: probes of containers that ran
	// before are spread over their first period.
	started time.Time
	// loopAt is when the reconcile loop last began an iteration (unix
	// nanoseconds; 0 before the first), for SyncLoopHealthCheck.
	loopAt atomic.Int64

	mu          sync.Mutex         // guards the fields below
	workers     map[string]*worker // by pod full name namespace/name, or orphan/<uid>
	problems    []manifest.Problem
	summary     string          // the STATUS line last sent
	readyAt     uint64          // dispatch sequence the first full reconcile waits for; 0 = not yet
	readyWait   map[string]bool // workers that have not synced readyAt yet
	notifyReady bool
	problemSeen map[string]bool // manifest problems already recorded as events
	order       manifest.Order  // the desired pods' start order (order.go)
	// stopPriority is each desired pod's stop priority (stopPriorities).
	stopPriority map[string]int32
	stopping     map[string]*stopping
	// held are, by pod UID, the keys of the workers that hold it (a state in
	// worker.pods) until its teardown; uidWaits: the last reconcile kept a
	// pod out until a worker of another name lets its UID go
	// (waitForHeldUIDsLocked).
	held     map[string]map[string]bool
	uidWaits bool

	// debugs are the debug containers running (Debug).
	debugs debugs

	pmu sync.Mutex // guards pr's fields; taken after mu when both are
	pr  *pressure  // without thresholds: never under pressure

	// removed are the next attempts of recently removed pods' containers.
	removed removedAttempts

	// rollouts are the pods' generations (agent/rollout); rerun asks the
	// reconcile loop to merge again when one is rolled back.
	rollouts *rollouts
	rerun    chan struct{}
	// restarts are staticpodd restart's markers; regenerate asks Run for a
	// reconcile once one changed.
	restarts   *restarts
	regenerate chan struct{}
	// follow are the digests of followed tags (runFollow).
	follow *follows
	// files are the pods' restart-on-change files; onChange, their
	// digests when their pods were last handed out.
	files    *hostfiles.Watcher
	onChange onChange
}

// New returns an agent that runs pods on rt.
func New(cfg Config, rt Runtime, logger *slog.Logger) *Agent {
	if cfg.SyncFrequency <= 0 {
		cfg.SyncFrequency = time.Minute
	}
	if cfg.RelistPeriod <= 0 {
		cfg.RelistPeriod = 20 * time.Second
	}
	if cfg.BackoffMax <= 0 {
		cfg.BackoffMax = defaultBackoffMax
	}
	if cfg.Notifier == nil {
		cfg.Notifier = nopNotifier{}
	}
	var marks lifecycle.Marks = lifecycle.NoMarks{}
	var pmarks prober.Marks = prober.NoMarks{}
	if cfg.Paths.RootDir != "" {
		marks = lifecycle.FileMarks{File: poddir.Root(cfg.Paths.RootDir).PostStartMark}
		pmarks = prober.FileMarks{File: poddir.Root(cfg.Paths.RootDir).ProbeMark}
	}
	if cfg.Events == nil {
		cfg.Events = events.New(cfg.NodeName, events.DefaultCapacity, logger)
	}
	if cfg.Eviction.Housekeeping <= 0 {
		cfg.Eviction.Housekeeping = DefaultHousekeeping
	}
	a := &Agent{
		pr:         &pressure{m: eviction.New(cfg.Eviction.Config, time.Now()), evicted: map[string]string{}, changed: make(chan struct{}, 1)},
		cfg:        cfg,
		rt:         rt,
		marks:      marks,
		probeMarks: pmarks,
		logger:     logger,
		events:     cfg.Events,
		resync:     make(chan struct{}, 1),
		restarts:   loadRestarts(cfg.Paths.RootDir, logger),
		follow:     loadFollows(cfg.Paths.RootDir, logger),
		regenerate: make(chan struct{}, 1),
		files:      hostfiles.New(cfg.RelistPeriod, logger),
		resynced:   make(chan struct{}),
		reconciled: make(chan struct{}),
		listing:    newListing(),
		started:    time.Now(),
		workers:    map[string]*worker{},
		summary:    "",
		statuses:   status.NewManager(cfg.NodeName, logger),
		timings:    newTimings(),
		rollouts:   newRollouts(cfg.Paths.RootDir),
		rerun:      make(chan struct{}, 1),
	}
	a.conv = manifestConverter{paths: cfg.Paths, objects: &a.objects}
	return a
}

// Events is the agent's event recorder: what happened to pods, newest last.
func (a *Agent) Events() *events.Recorder { return a.events }

// Resync makes every pod that waits for something (an image, a back-off) try
// again now; cmd calls it when an image has been imported.
func (a *Agent) Resync() {
	a.resyncMu.Lock()
	close(a.resynced)
	a.resynced = make(chan struct{})
	a.resyncMu.Unlock()
	// One pending resync stands for any number: the loop nudges every
	// worker after this send, and a worker nudged while it syncs syncs again.
	select {
	case a.resync <- struct{}{}:
	default:
	}
}

// nextResync returns a channel closed at the next Resync. Taken before a
// lookup of the store, it tells of every import after that lookup.
func (a *Agent) nextResync() <-chan struct{} {
	a.resyncMu.Lock()
	defer a.resyncMu.Unlock()
	return a.resynced
}

// converter turns a v1.Pod into what the runtime takes; tests replace it.
type converter interface {
	Sandbox(pod *v1.Pod) *podspec.Pod
	Container(pod *v1.Pod, c *v1.Container, attempt int) (*podspec.Container, error)
	PrepareVolumes(pod *v1.Pod) error
	// RefreshVolumes brings the pod's downwardAPI volumes up to date.
	RefreshVolumes(pod *v1.Pod) error
	RemoveVolumes(podUID string) error
	RemoveLogs(podUID string) error
	PruneLogs(pod *v1.Pod, container string, keepFrom int) error
	RemoveLeftovers(keep map[string]bool) ([]string, error)
}

type manifestConverter struct {
	paths manifest.Paths
	// objects are the ConfigMaps and Secrets the sources have now (the
	// reconcile loop stores each new Set).
	objects *atomic.Pointer[objects.Set]
}

// host is what converting pod needs of the machine and of its objects.
func (m manifestConverter) host() manifest.Host {
	h := machine()
	h.Objects = m.objectSet()
	return h
}

// objectSet is the current Set, as manifest.Objects: nil when there is none
// (a nil *objects.Set in the interface would not compare equal to nil).
func (m manifestConverter) objectSet() manifest.Objects {
	if m.objects == nil {
		return nil
	}
	if s := m.objects.Load(); s != nil {
		return s
	}
	return nil
}

func (m manifestConverter) Sandbox(pod *v1.Pod) *podspec.Pod { return manifest.Sandbox(pod, m.paths) }
func (m manifestConverter) Container(pod *v1.Pod, c *v1.Container, attempt int) (*podspec.Container, error) {
	h := containerHost(pod, c, m.paths)
	h.Objects = m.objectSet()
	return manifest.Container(pod, c, attempt, m.paths, h)
}
func (m manifestConverter) PrepareVolumes(pod *v1.Pod) error {
	return volumes.Prepare(pod, poddir.Root(m.paths.RootDir), m.host())
}
func (m manifestConverter) RefreshVolumes(pod *v1.Pod) error {
	return volumes.Refresh(pod, poddir.Root(m.paths.RootDir), m.host())
}
func (m manifestConverter) RemoveVolumes(uid string) error {
	return volumes.Remove(uid, poddir.Root(m.paths.RootDir))
}
func (m manifestConverter) RemoveLogs(uid string) error {
	return logfiles.RemovePodLogs(m.paths.PodLogsDir, uid)
}
func (m manifestConverter) RemoveLeftovers(keep map[string]bool) ([]string, error) {
	dirs, err := volumes.RemoveLeftovers(keep, poddir.Root(m.paths.RootDir))
	logs, lerr := logfiles.RemoveLeftoverPodLogs(m.paths.PodLogsDir, keep)
	for _, uid := range logs {
		if !slices.Contains(dirs, uid) {
			dirs = append(dirs, uid)
		}
	}
	return dirs, errors.Join(err, lerr)
}
func (m manifestConverter) PruneLogs(pod *v1.Pod, container string, keepFrom int) error {
	if m.paths.PodLogsDir == "" {
		return nil
	}
	if err := logfiles.PruneRuns(filepath.Join(m.paths.LogDir(pod), container), keepFrom); err != nil {
		return fmt.Errorf("prune logs of container %s of pod %s: %w", container, pod.Name, err)
	}
	return nil
}
