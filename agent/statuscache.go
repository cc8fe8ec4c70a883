package agent

import (
	"maps"
	"net/netip"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/status"
)

// statusCache is what the worker's last generated status was made of, and
// the pod it published with it: a sync whose inputs are the same publishes
// that pod again instead of generating its status and copying the pod,
// which a resync of every pod each SyncFrequency did at rest for nothing.
// One per worker, for its desired pod only: dropped when none is desired.
//
// It is used only once the status is a fixed point: generated from the
// same inputs and the previous status, it came out equal to that previous
// status. A status that keeps a condition's transition time (Input.Prev)
// is generated again at the sync after a change, from itself.
type statusCache struct {
	pod  *v1.Pod       // the desired pod, as the worker was given it
	prev *v1.PodStatus // w.prevState it was generated from
	// fixed: the status generated came out equal to prev's.
	fixed bool
	// published is the pod published with that status.
	published *v1.Pod

	// What status.Generate read, copied: the runtime's containers of the
	// pod, its sandbox, the node's address, the generation (its Last and
	// Final copied), the probe results of its running containers, and the
	// rollout condition added after.
	containers []podspec.ContainerStatus
	sandbox    bool
	network    *podspec.SandboxStatus
	nodeIP     netip.Addr
	gen        *status.Generation
	probes     []probeSeen
	rollout    *v1.PodCondition
}

// statusGenerated, when set (by tests only, before the agent runs), is
// called with each status publish generates and the one before it, on the
// worker's goroutine: what runs beside the worker may change meanwhile.
var statusGenerated func(s, prev *v1.PodStatus)

// probeSeen is what the status read of one running container's probes and
// postStart hook.
type probeSeen struct {
	id                          string
	hookRunning, started, ready bool
}

// seenProbes calls f with what the status reads of the probes of each
// running instance of st's containers of pod, in the order of st.
func (w *worker) seenProbes(pod *v1.Pod, st *podState, f func(probeSeen) bool) bool {
	for i := range st.containers {
		c := &st.containers[i]
		if c.State == podspec.StateExited || c.State == podspec.StateCreated || c.State == podspec.StateUnknown {
			continue
		}
		spec := findContainer(pod, c.Name)
		if spec == nil {
			continue
		}
		p := probeSeen{id: c.ID, hookRunning: w.hooks.Running(c.ID)}
		p.started, p.ready = w.probeState(spec, c.ID)
		if !f(p) {
			return false
		}
	}
	return true
}

// cachedStatus is the pod published last, when publishing pod now, with
// the runtime's st and rollout condition rc, would publish the same: nil
// when it would not, or may not.
func (w *worker) cachedStatus(pod *v1.Pod, st *podState, rc *v1.PodCondition) *v1.Pod {
	c := w.statusCache
	if c == nil || !c.fixed || c.pod != pod || c.prev != w.prevState || c.sandbox != st.sandbox || c.nodeIP != w.a.cfg.NodeIP ||
		!slices.EqualFunc(c.containers, st.containers, containerStatusEqual) ||
		!sandboxStatusEqual(c.network, st.network) || !conditionEqual(c.rollout, rc) || !w.gen.sameStatus(c.gen) {
		return nil
	}
	i := 0
	if !w.seenProbes(pod, st, func(p probeSeen) bool {
		if i >= len(c.probes) || c.probes[i] != p {
			return false
		}
		i++
		return true
	}) || i != len(c.probes) {
		return nil
	}
	return c.published
}

// probesSeen is what seenProbes calls its func with, in its order.
func (w *worker) probesSeen(pod *v1.Pod, st *podState) []probeSeen {
	var out []probeSeen
	w.seenProbes(pod, st, func(p probeSeen) bool { out = append(out, p); return true })
	return out
}

// rememberStatus makes the cache what publishing pod read (gen, st, rc,
// and probes, taken before the status) and published (out), its status
// generated from prev.
func (w *worker) rememberStatus(pod *v1.Pod, st *podState, gen *status.Generation, rc *v1.PodCondition, prev *v1.PodStatus, probes []probeSeen, out *v1.Pod) {
	c := &statusCache{pod: pod, prev: w.prevState, published: out,
		containers: slices.Clone(st.containers), sandbox: st.sandbox, nodeIP: w.a.cfg.NodeIP,
		network: copySandboxStatus(st.network), gen: copyGeneration(gen)}
	c.fixed = prev != nil && statusEqual(&out.Status, prev)
	if rc != nil {
		r := *rc
		c.rollout = &r
	}
	c.probes = probes
	w.statusCache = c
}

// sameStatus reports whether g.status() would be s, without making it.
func (g *generation) sameStatus(s *status.Generation) bool {
	if g == nil || s == nil {
		return g == nil && s == nil
	}
	if s.UID != g.uid || s.Policy != g.policy || !s.StartTime.Equal(g.startTime) || s.RestartedAll != g.restartedAll ||
		!maps.EqualFunc(s.Final, g.final, containerStatusEqual) {
		return false
	}
	stop := g.stop != nil && g.stop.reason != reasonRecreated
	if stop != (s.Stop != nil) || stop && (s.Stop.Reason != g.stop.reason || s.Stop.Message != g.stop.message) {
		return false
	}
	n := 0
	for name, ci := range g.ctrs {
		if ci == nil {
			continue
		}
		n++
		r, ok := s.Containers[name]
		reason, message := ci.reason, ci.message
		if err := g.convErr[name]; err != nil {
			reason, message = reasonConfigError, err.Error()
		}
		if !ok || r.Reason != reason || r.Message != message || r.RestartCount != g.firstAttempt[name] ||
			(r.Last == nil) != (ci.last == nil) || r.Last != nil && !containerStatusEqual(*r.Last, *ci.last) {
			return false
		}
	}
	for name, err := range g.convErr {
		if err == nil || g.ctrs[name] != nil {
			continue
		}
		n++
		r, ok := s.Containers[name]
		if !ok || r != (status.Remembered{Reason: reasonConfigError, Message: err.Error()}) {
			return false
		}
	}
	return n == len(s.Containers)
}

// copyGeneration is g with its Last and Final copied: the worker's may
// change in place.
func copyGeneration(g *status.Generation) *status.Generation {
	if g == nil {
		return nil
	}
	out := *g
	out.Final = maps.Clone(g.Final)
	out.Containers = make(map[string]status.Remembered, len(g.Containers))
	for name, r := range g.Containers {
		if r.Last != nil {
			l := *r.Last
			r.Last = &l
		}
		out.Containers[name] = r
	}
	if g.Stop != nil {
		s := *g.Stop
		out.Stop = &s
	}
	return &out
}

// containerStatusEqual compares every field of two instances.
func containerStatusEqual(a, b podspec.ContainerStatus) bool {
	return a.ID == b.ID && a.PodUID == b.PodUID && a.PodName == b.PodName && a.PodNamespace == b.PodNamespace &&
		a.Name == b.Name && a.Attempt == b.Attempt && a.Hash == b.Hash && a.Image == b.Image && a.ImageID == b.ImageID &&
		a.ImageRef == b.ImageRef && a.State == b.State && a.Pid == b.Pid && a.CreatedAt.Equal(b.CreatedAt) &&
		a.StartedAt.Equal(b.StartedAt) && a.FinishedAt.Equal(b.FinishedAt) && a.ExitCode == b.ExitCode &&
		a.Reason == b.Reason && a.Message == b.Message && a.LogPath == b.LogPath &&
		a.TerminationGracePeriod == b.TerminationGracePeriod && a.StopSignal == b.StopSignal &&
		maps.Equal(a.Annotations, b.Annotations)
}

func copySandboxStatus(s *podspec.SandboxStatus) *podspec.SandboxStatus {
	if s == nil {
		return nil
	}
	out := *s
	out.IPs, out.Plugins = slices.Clone(s.IPs), slices.Clone(s.Plugins)
	if s.Chosen != nil {
		c := *s.Chosen
		c.Plugins = slices.Clone(s.Chosen.Plugins)
		out.Chosen = &c
	}
	return &out
}

func sandboxStatusEqual(a, b *podspec.SandboxStatus) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if !slices.Equal(a.IPs, b.IPs) || a.Network != b.Network || a.Source != b.Source || !slices.Equal(a.Plugins, b.Plugins) || a.Message != b.Message {
		return false
	}
	if a.Chosen == nil || b.Chosen == nil {
		return a.Chosen == nil && b.Chosen == nil
	}
	return a.Chosen.Network == b.Chosen.Network && a.Chosen.Source == b.Chosen.Source && slices.Equal(a.Chosen.Plugins, b.Chosen.Plugins) && a.Chosen.Why == b.Chosen.Why
}

// statusEqual is apimachinery's semantic equality of two statuses: what
// any of their readers can tell apart.
func statusEqual(a, b *v1.PodStatus) bool { return equality.Semantic.DeepEqual(a, b) }

func conditionEqual(a, b *v1.PodCondition) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return *a == *b
}
