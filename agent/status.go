package agent

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/status"
)

// containerIDPrefix makes runtime IDs look like the kubelet's <runtime>://<id>.
const containerIDPrefix = status.ContainerIDPrefix

// publish stores pod (nil: none is desired) with its live status for Pods and
// the summary. Every other generation the worker still has is listed
// Terminating, with a deletionTimestamp, as the API shows a pod being
// deleted: the pod published before, or what an adopted pod's containers
// tell, until nothing of it is left.
func (w *worker) publish(pod *v1.Pod) {
	var out *v1.Pod
	if pod != nil {
		out = pod.DeepCopy()
		// The hashes of the containers as written are the agent's own business.
		delete(out.Annotations, manifest.AnnotationContainerHashes)
		out.Status = w.podStatus(pod)
		// The kubelet's kubelet_pod_start_duration_seconds: a pod seen
		// Pending turns Running, timed from when the agent first took it
		// (status.startTime). A pod found running at start is not counted.
		if w.prevState != nil && w.prevState.Phase == v1.PodPending && out.Status.Phase == v1.PodRunning &&
			w.gen != nil && w.gen.uid == string(pod.UID) && !w.gen.startTime.IsZero() {
			w.a.timings.podStart.Observe(time.Since(w.gen.startTime).Seconds())
		}
		w.prevState = out.Status.DeepCopy()
	}
	desired := ""
	if out != nil {
		desired = string(out.UID)
	}
	w.mu.Lock()
	if prev := w.status; prev != nil && string(prev.UID) != desired && w.pods[string(prev.UID)] != nil {
		w.stopping[string(prev.UID)] = status.Terminating(prev, time.Now())
	}
	w.status = out
	for uid, p := range w.stopping {
		st := w.pods[uid]
		if st == nil || uid == desired {
			delete(w.stopping, uid)
			continue
		}
		status.RefreshTerminating(p, st.containers)
	}
	for uid, st := range w.pods {
		if uid == desired || w.stopping[uid] != nil {
			continue
		}
		if p := orphanPod(uid, st); p != nil {
			w.stopping[uid] = p
		}
	}
	w.mu.Unlock()
	w.a.statusChanged(w.key)
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

// podStatus is the status of pod as the worker knows it: what the runtime
// has of its UID, the generation the worker runs, its probes and hooks.
func (w *worker) podStatus(pod *v1.Pod) v1.PodStatus {
	var st *podState
	if w.pods != nil {
		st = w.pods[string(pod.UID)]
	}
	if st == nil {
		st = &podState{}
	}
	return status.Generate(status.Input{
		Pod: pod, Containers: st.containers, Sandbox: st.sandbox, Network: st.network,
		NodeIP: w.a.cfg.NodeIP,
		Gen:    w.gen.status(),
		Probe: func(c *v1.Container, id string) (started, ready bool) {
			if w.postStarts[id] != nil {
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
		Containers: make(map[string]status.Remembered, len(g.ctrs))}
	if g.stop != nil {
		out.Stop = &status.Stop{Reason: g.stop.reason, Message: g.stop.message}
	}
	for name, ci := range g.ctrs {
		if ci == nil {
			continue
		}
		out.Containers[name] = status.Remembered{Reason: ci.reason, Message: ci.message, Last: ci.last}
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

// podTally counts pods by what the STATUS line says of them. The agent
// keeps one per worker and their sum, so that a change of one pod costs
// the STATUS line that pod's work, not every pod's.
type podTally struct {
	pods, running, pending, succeeded, failed int
	waiting                                   []string // "name: reason"
}

// add counts pod p (node: the suffix its static pod name carries).
func (t *podTally) add(p *v1.Pod, node string) {
	t.pods++
	c := status.Classify(p)
	if c.Waiting != "" {
		t.waiting = append(t.waiting, strings.TrimSuffix(p.Name, "-"+node)+": "+c.Waiting)
		return
	}
	switch c.Phase {
	case v1.PodRunning:
		t.running++
	case v1.PodSucceeded:
		t.succeeded++
	case v1.PodFailed:
		t.failed++
	default:
		t.pending++
	}
}

// addCounts adds (sign 1) or takes away (sign -1) o's counts; the waiting
// pods are kept per worker, not summed.
func (t *podTally) addCounts(o podTally, sign int) {
	t.pods += sign * o.pods
	t.running += sign * o.running
	t.pending += sign * o.pending
	t.succeeded += sign * o.succeeded
	t.failed += sign * o.failed
}

// summarize is the one-line STATUS for systemd:
// "3 pods: 2 running, 1 waiting (etcd: CrashLoopBackOff)".
func summarize(pods []v1.Pod, node string, problems int) string {
	var t podTally
	for i := range pods {
		t.add(&pods[i], node)
	}
	return t.line(t.waiting, problems)
}

// line is the STATUS line of t's counts, with the waiting pods named in
// order.
func (t *podTally) line(waiting []string, problems int) string {
	noun := "pods"
	if t.pods == 1 {
		noun = "pod"
	}
	s := fmt.Sprintf("%d %s", t.pods, noun)
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(t.running, "running")
	if len(waiting) > 0 {
		parts = append(parts, fmt.Sprintf("%d waiting (%s)", len(waiting), strings.Join(waiting, ", ")))
	}
	add(t.pending, "pending")
	add(t.succeeded, "succeeded")
	add(t.failed, "failed")
	if len(parts) > 0 {
		s += ": " + strings.Join(parts, ", ")
	}
	switch {
	case problems == 1:
		s += "; 1 manifest problem"
	case problems > 1:
		s += fmt.Sprintf("; %d manifest problems", problems)
	}
	return s
}
