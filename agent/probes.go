package agent

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/prober"
	"github.com/staticpodd/staticpodd/agent/status"
)

// The worker decides which of its containers are probed; its prober.Manager
// runs their probes and keeps what they said in its results cache, which
// the worker reads when it plans (markProbes) and publishes (probeState).

// newProbes is the probe manager of worker w.
func newProbes(w *worker) *prober.Manager {
	return prober.NewManager(prober.ManagerConfig{Marks: w.a.probeMarks, Boot: w.a.started, Counts: &w.a.probeCounts,
		Logger: w.logger, Updated: w.probeUpdated, Errored: w.probeErrored})
}

// syncProbes runs the probes of each running container of pod whose spec is
// the desired one, and stops every other probe (all of them when pod is nil,
// the pod being removed: probes never kill a container that is stopping).
func (w *worker) syncProbes(ctx context.Context, pod *v1.Pod) {
	want, spec := w.wantedProbes(pod)
	w.probes.Sync(ctx, want, spec)
	w.probes.Prune(func(id string) bool {
		for _, st := range w.pods {
			for i := range st.containers {
				if st.containers[i].ID == id {
					return true
				}
			}
		}
		return false
	})
}

// startProbes starts the probes syncProbes would, and stops none: a probe
// that winds down slowly (an exec slow to die) holds up nothing.
func (w *worker) startProbes(ctx context.Context, pod *v1.Pod) {
	want, spec := w.wantedProbes(pod)
	w.probes.Start(ctx, want, spec)
}

// wantedProbes are the containers syncProbes probes, by runtime ID, and the
// spec of their probes.
func (w *worker) wantedProbes(pod *v1.Pod) (map[string]*v1.Container, func(id string, c *v1.Container) prober.Spec) {
	var want map[string]*v1.Container // made only for a container with probes
	var st *podState
	if pod != nil && w.gen != nil && w.gen.uid == string(pod.UID) {
		st = w.pods[string(pod.UID)]
	}
	if st != nil {
		// Sidecars and regular containers: init containers run to completion.
		probe := func(c *v1.Container) {
			if !prober.HasProbes(c) {
				return
			}
			i := status.LatestIndex(st.containers, c.Name)
			if i < 0 {
				return
			}
			l := &st.containers[i]
			// Probed once its postStart hook is done, as the kubelet's
			// prober sees a container once its pod worker has gone on.
			if l.State == podspec.StateRunning && l.Hash == w.gen.hashes[c.Name] && !w.hooks.Running(l.ID) {
				if want == nil {
					want = map[string]*v1.Container{}
				}
				want[l.ID] = c
			}
		}
		for i := range pod.Spec.InitContainers {
			if c := &pod.Spec.InitContainers[i]; isSidecar(c) {
				probe(c)
			}
		}
		for i := range pod.Spec.Containers {
			if c := &pod.Spec.Containers[i]; isSidecar(c) || !slices.ContainsFunc(pod.Spec.InitContainers, func(i v1.Container) bool { return i.Name == c.Name }) {
				probe(c)
			}
		}
	}
	return want, func(id string, c *v1.Container) prober.Spec {
		var startedAt time.Time
		if i := status.LatestIndex(st.containers, c.Name); i >= 0 {
			startedAt = st.containers[i].StartedAt
		}
		return prober.Spec{Pod: pod, ID: id, StartedAt: startedAt, Target: w.probeTarget(pod, c, id)}
	}
}

// probeTarget is how probes reach container c (runtime ID id) of pod: the
// runtime's dialer into the pod's network namespace, and its exec.
func (w *worker) probeTarget(pod *v1.Pod, c *v1.Container, id string) *prober.Target {
	uid := string(pod.UID)
	return &prober.Target{
		Container: c,
		Host:      w.podHost(pod),
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return w.a.rt.Dial(ctx, uid, network, addr)
		},
		// The kubelet's exec probe: the command as written (no
		// environment expansion beyond the container's own), its
		// output combined, killed at the probe's timeout (ctx).
		Exec: func(ctx context.Context, cmd []string, out io.Writer) (int, error) {
			return w.a.rt.Exec(ctx, id, podspec.ExecSpec{Cmd: cmd, Stdout: out, Stderr: out})
		},
	}
}

// probeUpdated takes a probe's update of container c of pod, which the
// results cache has, from its goroutine, and wakes the worker. A probe that
// turned failing is an Unhealthy event, with the kubelet's message, naming
// the container from the probe's own pod: the published status may not
// show the container yet.
func (w *worker) probeUpdated(pod *v1.Pod, c string, u prober.Update) {
	if u.Result == prober.Failure {
		w.a.events.Eventf(events.ContainerRef(pod, c), v1.EventTypeWarning, events.Unhealthy,
			"%s probe failed: %s", probeTypeName(u.Kind), u.Output)
	}
	w.nudge()
}

// probeErrored records, from a probe's goroutine, that a probe of container
// c of pod could not be made and its result was thrown away: an Unhealthy
// event with the kubelet's message, once each time the probe starts to err.
// The event names the container from the probe's own pod, not from the
// published status, which may not show the container yet: a first error
// lost would be lost for as long as the probe errs.
func (w *worker) probeErrored(pod *v1.Pod, c string, k prober.Kind, r prober.Result, err error) {
	w.a.events.Eventf(events.ContainerRef(pod, c), v1.EventTypeWarning, events.Unhealthy,
		"%s probe errored and resulted in %s state: %s", probeTypeName(k), r, err)
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
	results := w.probes.Results()
	for _, st := range w.pods {
		st.unhealthy, st.unstarted = nil, nil
		for _, c := range st.containers {
			h, ok := results.Get(c.ID)
			if !ok {
				continue
			}
			if h.Failed != "" { // exited too: a probe's kill restarts it under OnFailure
				if st.unhealthy == nil {
					st.unhealthy = map[string]prober.Kind{}
				}
				st.unhealthy[c.ID] = h.Failed
			}
			if !h.Started && c.State != podspec.StateExited {
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
	h, ok := w.probes.Results().Get(id)
	if !ok {
		h.Started, h.Ready = c.StartupProbe == nil, c.ReadinessProbe == nil
	}
	return h.Started, h.Started && h.Ready
}

// probeStatuses are the last results of the probes of the running
// containers of the published pod, which the status manager has.
func (w *worker) probeStatuses() []prober.Status {
	pod := w.a.statuses.Desired(w.key)
	if pod == nil {
		return nil
	}
	var out []prober.Status
	for _, cs := range pod.Status.ContainerStatuses {
		if cs.State.Running == nil {
			continue
		}
		for _, u := range w.probes.Results().Last(strings.TrimPrefix(cs.ContainerID, containerIDPrefix)) {
			out = append(out, prober.Status{Namespace: pod.Namespace, Pod: pod.Name, Container: cs.Name,
				Probe: u.Kind, Result: u.Result.String(), Output: u.Output, At: u.At})
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
		out = append(out, w.probeStatuses()...)
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
	if restartsAfterKill(c, pod.Spec.RestartPolicy) {
		msg += ", will be restarted"
	}
	return msg
}

// ProbeCounts returns how many probes were made, by pod, container, probe
// and result, for the pods the agent has now. A pod's series are dropped at
// the first scrape after the pod is gone.
func (a *Agent) ProbeCounts() map[prober.CountKey]uint64 {
	a.mu.Lock()
	uids := map[string]bool{}
	for _, w := range a.workers {
		if uid := w.publishedUID(); uid != "" {
			uids[uid] = true
		}
	}
	a.mu.Unlock()
	return a.probeCounts.Snapshot(func(uid string) bool { return uids[uid] })
}
