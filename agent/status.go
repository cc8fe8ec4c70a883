package agent

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/status"
)

// containerIDPrefix makes runtime IDs look like the kubelet's <runtime>://<id>.
const containerIDPrefix = status.ContainerIDPrefix

// publish gives the status manager pod (nil: none is desired) with its live
// status, for Pods, the watchers and the STATUS line. Every other generation
// the worker still has is listed Terminating, with a deletionTimestamp, as
// the API shows a pod being deleted: the pod published before, or what an
// adopted pod's containers tell, until nothing of it is left.
func (w *worker) publish(pod *v1.Pod) {
	var out *v1.Pod
	if pod == nil {
		w.statusCache = nil
	} else {
		st := w.podState(pod)
		rc := w.a.rollouts.condition(w.key, pod)
		// A resync of a pod of which nothing changed publishes the same
		// pod again, without generating its status (statusCache).
		if out = w.cachedStatus(pod, st, rc); out == nil {
			// The desired pod's spec and metadata, shared: neither the
			// desired pod nor a published one ever changes (wanted,
			// status.Share), and whoever changes a pod shown changes a
			// copy of its own (status.Shared.Copy, Manager.Pods). Only
			// the annotations differ, and the status. A deep copy here
			// was a second copy of every pod's spec at rest, about 3 KiB
			// a pod (heap profile at rest, 300 pods).
			out = &v1.Pod{TypeMeta: pod.TypeMeta, ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}
			// The hashes of the containers as written are the agent's own business.
			out.Annotations = publishedAnnotations(pod.Annotations)
			gen, prev := w.gen.status(), w.prevState
			// What the probes say, before the status reads it: a result
			// that comes meanwhile (they run beside the worker) differs
			// from the cache's at the next publish, which generates again.
			probes := w.probesSeen(pod, st)
			out.Status = w.podStatus(pod, st, gen)
			if statusGenerated != nil {
				statusGenerated(&out.Status, prev)
			}
			if rc != nil {
				out.Status.Conditions = append(out.Status.Conditions, *rc)
			}
			// The kubelet's kubelet_pod_start_duration_seconds: a pod seen
			// Pending turns Running, timed from when the agent first took it
			// (status.startTime). A pod found running at start is not counted.
			if prev != nil && prev.Phase == v1.PodPending && out.Status.Phase == v1.PodRunning &&
				w.gen != nil && w.gen.uid == string(pod.UID) && !w.gen.startTime.IsZero() {
				w.a.timings.podStart.Observe(time.Since(w.gen.startTime).Seconds())
			}
			// The status published: out never changes once published
			// (status.Share), so the next generation reads it there
			// instead of a copy of its own, a few KiB a pod at rest.
			w.prevState = &out.Status
			w.keepConditions(pod, st, out.Status.Conditions)
			w.rememberStatus(pod, st, gen, rc, prev, probes, out)
		}
	}
	now := time.Now()
	w.a.statuses.Update(w.key, func(prev *v1.Pod, stopping map[string]*v1.Pod) (*v1.Pod, map[string]*v1.Pod) {
		desired := ""
		if out != nil {
			desired = string(out.UID)
		}
		if prev != nil && string(prev.UID) != desired && w.pods[string(prev.UID)] != nil {
			stopping[string(prev.UID)] = status.Terminating(prev, now)
		}
		for uid, p := range stopping {
			st := w.pods[uid]
			if st == nil || uid == desired {
				delete(stopping, uid)
				continue
			}
			stopping[uid] = status.RefreshTerminating(p, st.containers)
		}
		for uid, st := range w.pods {
			if uid == desired || stopping[uid] != nil {
				continue
			}
			if p := orphanPod(uid, st); p != nil {
				stopping[uid] = p
			}
		}
		return out, stopping
	})
	w.readinessShown(out)
	w.a.listing.published(w.key)
	w.a.summaryChanged()
}

// publishedAnnotations is a copy of a desired pod's annotations without
// those that are the agent's own business: the hashes of the containers as
// written and the manifest's UID. nil stays nil.
func publishedAnnotations(in map[string]string) map[string]string {
	if in == nil {
		return nil
	}
	out := make(map[string]string, len(in))
	for k, v := range in {
		if k != manifest.AnnotationContainerHashes && k != manifest.AnnotationManifestUID {
			out[k] = v
		}
	}
	return out
}

// orphanPod is how the pod of UID uid that an earlier daemon ran, of which
// the runtime has st, is shown while it is removed (status.Orphan).
func orphanPod(uid string, st *podState) *v1.Pod {
	return status.Orphan(uid, st.containers, adoptedGrace(st.containers), time.Now())
}

// addresses sets status's addresses of pod, of which the runtime has st
// (status.Addresses).
func (w *worker) addresses(pod *v1.Pod, st *podState, s *v1.PodStatus) {
	status.Addresses(pod, w.a.cfg.NodeIP, st.sandbox, st.network, s)
}

// podState is what the runtime has of pod's UID (empty for nothing).
func (w *worker) podState(pod *v1.Pod) *podState {
	var st *podState
	if w.pods != nil {
		st = w.pods[string(pod.UID)]
	}
	if st == nil {
		st = &podState{}
	}
	return st
}

// podStatus is the status of pod as the worker knows it: what the runtime
// has of its UID (st), the generation the worker runs (gen, w.gen's
// status), its probes and hooks.
func (w *worker) podStatus(pod *v1.Pod, st *podState, gen *status.Generation) v1.PodStatus {
	return status.Generate(status.Input{
		Pod: pod, Containers: st.containers, Sandbox: st.sandbox, Network: st.network,
		NodeIP: w.a.cfg.NodeIP,
		Gen:    gen,
		Probe: func(c *v1.Container, id string) (started, ready bool) {
			if w.hooks.Running(id) {
				return false, false // until its postStart hook is done
			}
			return w.probeState(c, id)
		},
		Prev: w.prevState,
		Now:  time.Now(),
	})
}

// status is what the status generator reads of g; nil for none.
func (g *generation) status() *status.Generation {
	if g == nil {
		return nil
	}
	out := &status.Generation{UID: g.uid, Policy: g.policy, StartTime: g.startTime, Final: g.final,
		Containers: make(map[string]status.Remembered, len(g.ctrs)), RestartedAll: g.restartedAll}
	if g.stop != nil && g.stop.reason != reasonRecreated {
		out.Stop = &status.Stop{Reason: g.stop.reason, Message: g.stop.message}
	}
	for name, ci := range g.ctrs {
		if ci == nil {
			continue
		}
		out.Containers[name] = status.Remembered{Reason: ci.reason, Message: ci.message, Last: ci.last,
			RestartCount: g.firstAttempt[name]}
	}
	for name, err := range g.convErr {
		if err == nil {
			continue
		}
		c := out.Containers[name]
		c.Reason, c.Message = reasonConfigError, err.Error()
		out.Containers[name] = c
	}
	return out
}
