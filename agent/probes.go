package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/prober"
)

// health is what a container instance's probes said; guarded by worker.mu,
// written by the probe goroutines through report.
type health struct {
	started bool // no startup probe, or it passed
	ready   bool // no readiness probe, or it passes
	// failed is the probe (liveness or startup) that failed past its
	// threshold: the container is to be killed, and restarted unless the
	// restartPolicy is Never.
	failed prober.Kind
	last   map[prober.Kind]prober.Update
	podUID string // where its started and ready marks are kept
}

// probing is one container instance's running probes; owned by the worker
// goroutine.
type probing struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func hasProbes(c *v1.Container) bool {
	return c.StartupProbe != nil || c.LivenessProbe != nil || c.ReadinessProbe != nil
}

// syncProbes runs the probes of each running container of pod whose spec is
// the desired one, and stops every other probe (all of them when pod is nil,
// the pod being removed: probes never kill a container that is stopping).
func (w *worker) syncProbes(ctx context.Context, pod *v1.Pod) {
	want := map[string]*v1.Container{}
	var st *podState
	if pod != nil && w.gen != nil && w.gen.uid == string(pod.UID) {
		st = w.pods[string(pod.UID)]
	}
	if st != nil {
		latest := latestByName(st.containers)
		var probed []*v1.Container // sidecars and regular containers: init containers run to completion
		for _, c := range manifest.AllContainers(pod) {
			if isSidecar(c) || !slices.ContainsFunc(pod.Spec.InitContainers, func(i v1.Container) bool { return i.Name == c.Name }) {
				probed = append(probed, c)
			}
		}
		for _, c := range probed {
			l, ok := latest[c.Name]
			// Probed once its postStart hook is done, as the kubelet's
			// prober sees a container once its pod worker has gone on.
			if ok && hasProbes(c) && l.State == podspec.StateRunning && l.Hash == w.gen.hashes[c.Name] && w.postStarts[l.ID] == nil {
				want[l.ID] = c
			}
		}
	}
	for id, p := range w.probes {
		if want[id] == nil {
			p.cancel()
			<-p.done
			delete(w.probes, id)
		}
	}
	for id, c := range want {
		if w.probes[id] == nil {
			w.startProbes(ctx, pod, c, latestByName(st.containers)[c.Name])
		}
	}
	w.pruneHealth()
}

func (w *worker) startProbes(ctx context.Context, pod *v1.Pod, c *v1.Container, cs podspec.ContainerStatus) {
	uid, id := string(pod.UID), cs.ID
	startedAt := cs.StartedAt
	if startedAt.IsZero() {
		startedAt = time.Now()
	}
	// A container found running at start keeps what the last daemon's
	// probes said of it, so a daemon restart does not make a Ready pod
	// unready until its probes run again.
	adopted := startedAt.Before(w.a.started)
	wasStarted := adopted && c.StartupProbe != nil && w.a.probeMarks.Marked(uid, id, markStarted)
	wasReady := adopted && c.ReadinessProbe != nil && w.a.probeMarks.Marked(uid, id, markReady)
	w.mu.Lock()
	if w.health[cs.ID] == nil {
		w.health[cs.ID] = &health{
			started: c.StartupProbe == nil || wasStarted,
			ready:   c.ReadinessProbe == nil || wasReady,
			last:    map[prober.Kind]prober.Update{},
			podUID:  uid,
		}
	}
	w.mu.Unlock()

	host := w.podHost(pod)
	cfg := prober.Config{
		ContainerID: cs.ID,
		StartedAt:   startedAt,
		Target: &prober.Target{
			Container: c,
			Host:      host,
			Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
				return w.a.rt.Dial(ctx, uid, network, addr)
			},
			// The kubelet's exec probe: the command as written (no
			// environment expansion beyond the container's own), its
			// output combined, killed at the probe's timeout (ctx).
			Exec: func(ctx context.Context, cmd []string, out io.Writer) (int, error) {
				return w.a.rt.Exec(ctx, id, podspec.ExecSpec{Cmd: cmd, Stdout: out, Stderr: out})
			},
		},
		Startup:   c.StartupProbe,
		Liveness:  c.LivenessProbe,
		Readiness: c.ReadinessProbe,
		// A container found running when the daemon started: spread the
		// first probes of all of them over a period, as the kubelet does
		// after a restart. One this daemon started is probed at once.
		Jitter:  adopted,
		Started: wasStarted,
		Ready:   wasReady,
		Report:  w.report,
		Observe: func(k prober.Kind, r prober.Result) {
			w.a.probeCounts.add(prober.CountKey{Namespace: pod.Namespace, Pod: pod.Name, UID: uid, Container: c.Name, Probe: k, Result: r})
		},
		Logger: w.logger.With("container", c.Name, "id", cs.ID),
	}
	pctx, cancel := context.WithCancel(ctx)
	p := &probing{cancel: cancel, done: make(chan struct{})}
	w.probes[cs.ID] = p
	go func() {
		defer close(p.done)
		prober.Run(pctx, cfg)
	}()
}

// report takes a probe's update, from its goroutine, and wakes the worker. A
// probe that turned failing is an Unhealthy event, with the kubelet's message.
func (w *worker) report(u prober.Update) {
	w.mu.Lock()
	h := w.health[u.ContainerID]
	var pod *v1.Pod
	container := ""
	if p := w.a.statuses.Desired(w.key); p != nil {
		for _, cs := range p.Status.ContainerStatuses {
			if cs.ContainerID == containerIDPrefix+u.ContainerID {
				pod, container = p, cs.Name
			}
		}
	}
	var mark string
	if h != nil {
		h.last[u.Kind] = u
		switch u.Kind {
		case prober.Startup:
			h.started, mark = u.Result == prober.Success, markStarted
		case prober.Readiness:
			h.ready, mark = u.Result == prober.Success, markReady
		}
		if u.Result == prober.Failure && (u.Kind == prober.Liveness || u.Kind == prober.Startup) {
			h.failed = u.Kind
		}
	}
	var podUID string
	if h != nil {
		podUID = h.podUID
	}
	w.mu.Unlock()
	if mark != "" {
		if err := w.a.probeMarks.Set(podUID, u.ContainerID, mark, u.Result == prober.Success); err != nil {
			w.logger.Warn("cannot keep a probe's result for the next daemon", "id", u.ContainerID, "err", err)
		}
	}
	if h != nil && pod != nil && u.Result == prober.Failure {
		w.a.events.Eventf(events.ContainerRef(pod, container), v1.EventTypeWarning, events.Unhealthy,
			"%s probe failed: %s", probeTypeName(u.Kind), u.Output)
	}
	if h != nil {
		w.nudge()
	}
}

// probeTypeName is how the kubelet's events name a probe: Liveness,
// Readiness, Startup.
func probeTypeName(k prober.Kind) string {
	s := string(k)
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// pruneHealth forgets the health of containers the worker no longer has.
func (w *worker) pruneHealth() {
	known := map[string]bool{}
	for _, st := range w.pods {
		for _, c := range st.containers {
			known[c.ID] = true
		}
	}
	w.mu.Lock()
	var gone map[string]string // container ID -> pod UID
	for id, h := range w.health {
		if !known[id] {
			delete(w.health, id)
			if gone == nil {
				gone = map[string]string{}
			}
			gone[id] = h.podUID
		}
	}
	w.mu.Unlock()
	for id, uid := range gone {
		_ = w.a.probeMarks.Set(uid, id, markStarted, false)
		_ = w.a.probeMarks.Set(uid, id, markReady, false)
	}
}

// The marks that keep what a running container's probes said across daemon
// restarts.
const (
	markStarted = "started"
	markReady   = "ready"
)

// probeMarks remember, across daemon restarts, which running containers'
// startup probe has passed and which are ready: a mark is set when the
// result turns to success and cleared when it turns to failure or the
// container goes. Containers are named by pod UID and container ID.
type probeMarks interface {
	Set(uid, id, mark string, on bool) error
	Marked(uid, id, mark string) bool
}

// fileProbeMarks keeps probe marks as empty files
// <RootDir>/pods/<uid>/probes/<container-id>.<mark>, which go with the pod's
// directory.
type fileProbeMarks struct{ paths manifest.Paths }

func (m fileProbeMarks) file(uid, id, mark string) string {
	return filepath.Join(m.paths.PodDir(uid), "probes", id+"."+mark)
}

func (m fileProbeMarks) Set(uid, id, mark string, on bool) error {
	if uid == "" || id == "" || strings.ContainsAny(uid+id, "/.") {
		return nil
	}
	f := m.file(uid, id, mark)
	if !on {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		return err
	}
	return os.WriteFile(f, nil, 0o600)
}

func (m fileProbeMarks) Marked(uid, id, mark string) bool {
	if uid == "" || id == "" || strings.ContainsAny(uid+id, "/.") {
		return false
	}
	_, err := os.Lstat(m.file(uid, id, mark))
	return err == nil
}

// noProbeMarks remembers nothing: without a root dir a daemon restart makes
// probed containers unready until their probes pass again.
type noProbeMarks struct{}

func (noProbeMarks) Set(string, string, string, bool) error { return nil }
func (noProbeMarks) Marked(string, string, string) bool     { return false }

// markProbes hands plan what the probes said: the containers whose liveness
// or startup probe failed, and those not started yet; and the sidecars of
// the desired pod.
func (w *worker) markProbes(pod *v1.Pod) {
	if pod != nil {
		if st := w.pods[string(pod.UID)]; st != nil {
			st.sidecars = st.sidecars[:0]
			for i := range pod.Spec.InitContainers {
				if isSidecar(&pod.Spec.InitContainers[i]) {
					st.sidecars = append(st.sidecars, pod.Spec.InitContainers[i].Name)
				}
			}
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, st := range w.pods {
		st.unhealthy, st.unstarted = nil, nil
		for _, c := range st.containers {
			h := w.health[c.ID]
			if h == nil {
				continue
			}
			if h.failed != "" { // exited too: a probe's kill restarts it under OnFailure
				if st.unhealthy == nil {
					st.unhealthy = map[string]prober.Kind{}
				}
				st.unhealthy[c.ID] = h.failed
			}
			if !h.started && c.State != podspec.StateExited {
				if st.unstarted == nil {
					st.unstarted = map[string]bool{}
				}
				st.unstarted[c.ID] = true
			}
		}
	}
}

// probeState is whether a running container has started and is ready, from
// its probes; a container whose probes have not said yet has not started if
// it has a startup probe, and is not ready if it has a readiness probe.
func (w *worker) probeState(c *v1.Container, id string) (started, ready bool) {
	w.mu.Lock()
	h := w.health[id]
	if h != nil {
		started, ready = h.started, h.ready
	}
	w.mu.Unlock()
	if h == nil {
		started, ready = c.StartupProbe == nil, c.ReadinessProbe == nil
	}
	return started, started && ready
}

// probeStatusesLocked lists the last results of the probes of the running
// containers of the published pod; w.mu held.
func (w *worker) probeStatusesLocked() []prober.Status {
	pod := w.a.statuses.Desired(w.key)
	if pod == nil {
		return nil
	}
	var out []prober.Status
	for _, cs := range pod.Status.ContainerStatuses {
		h := w.health[strings.TrimPrefix(cs.ContainerID, containerIDPrefix)]
		if cs.State.Running == nil || h == nil {
			continue
		}
		for _, k := range []prober.Kind{prober.Startup, prober.Liveness, prober.Readiness} {
			if u, ok := h.last[k]; ok {
				out = append(out, prober.Status{Namespace: pod.Namespace, Pod: pod.Name, Container: cs.Name,
					Probe: k, Result: u.Result.String(), Output: u.Output, At: u.At})
			}
		}
	}
	return out
}

// Probes returns the last result of every probe of every running container,
// sorted by pod and container.
func (a *Agent) Probes() []prober.Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []prober.Status
	for _, w := range a.workers {
		w.mu.Lock()
		out = append(out, w.probeStatusesLocked()...)
		w.mu.Unlock()
	}
	slices.SortStableFunc(out, func(x, y prober.Status) int {
		return strings.Compare(x.Namespace+"/"+x.Pod+"/"+x.Container, y.Namespace+"/"+y.Pod+"/"+y.Container)
	})
	return out
}

// probeGrace is how long a container killed for a failed probe gets: the
// probe's terminationGracePeriodSeconds, else the pod's (the kubelet's
// setTerminationGracePeriod).
func probeGrace(pod *v1.Pod, c *v1.Container, kind prober.Kind) time.Duration {
	p := c.LivenessProbe
	if kind == prober.Startup {
		p = c.StartupProbe
	}
	if p != nil && p.TerminationGracePeriodSeconds != nil {
		return max(time.Duration(*p.TerminationGracePeriodSeconds)*time.Second, manifest.MinimumGracePeriod)
	}
	return podGrace(pod)
}

// probeKillReason is the kubelet's message for a container killed by a probe.
func probeKillReason(pod *v1.Pod, c *v1.Container, kind prober.Kind) string {
	msg := fmt.Sprintf("Container %s failed %s probe", c.Name, kind)
	if pod.Spec.RestartPolicy != v1.RestartPolicyNever || isSidecar(c) {
		msg += ", will be restarted"
	}
	return msg
}

// probeCounts counts the probes made. A pod's series are dropped at the
// first scrape after the pod is gone, as the kubelet deletes a pod's
// prober series when it removes the pod's probe workers.
type probeCounts struct {
	mu sync.Mutex // guards n
	n  map[prober.CountKey]uint64
}

func (p *probeCounts) add(k prober.CountKey) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.n == nil {
		p.n = map[prober.CountKey]uint64{}
	}
	p.n[k]++
}

// ProbeCounts returns how many probes were made, by pod, container, probe
// and result, for the pods the agent has now.
func (a *Agent) ProbeCounts() map[prober.CountKey]uint64 {
	a.mu.Lock()
	uids := map[string]bool{}
	for key := range a.workers {
		if p := a.statuses.Desired(key); p != nil {
			uids[string(p.UID)] = true
		}
	}
	a.mu.Unlock()
	a.probeCounts.mu.Lock()
	defer a.probeCounts.mu.Unlock()
	out := make(map[prober.CountKey]uint64, len(a.probeCounts.n))
	for k, v := range a.probeCounts.n {
		if !uids[k.UID] {
			delete(a.probeCounts.n, k) // the pod is gone: its series go with it
			continue
		}
		out[k] = v
	}
	return out
}
