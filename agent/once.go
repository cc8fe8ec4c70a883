package agent

import (
	"context"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// Outcomes of run --once for each pod.
const (
	OnceRunning   = "Running"   // every container runs (restartPolicy Always)
	OnceSucceeded = "Succeeded" // finished, every container exited 0
	OnceFailed    = "Failed"    // finished with a failure, or cannot start without a change
	OnceInvalid   = "Invalid"   // a manifest that could not be used
	OncePending   = "Pending"   // none of the above yet
)

// OnceResult is how one pod, or one manifest problem, ended up under
// run --once.
type OnceResult struct {
	Pod     *v1.Pod           // nil for a problem
	Problem *manifest.Problem // nil for a pod
	Outcome string
	// Message says why a pod failed or is still pending: its first
	// container's waiting or termination message; for a problem, its error.
	Message string
}

// OK reports whether the outcome is one run --once succeeds with.
func (r OnceResult) OK() bool { return r.Outcome == OnceRunning || r.Outcome == OnceSucceeded }

// WaitOnce waits until every source was seen, every desired pod synced and
// then each runs, has finished or cannot start (the kubelet's --runonce, see
// onceOutcome), or until ctx ends. It returns a result per desired pod and
// per manifest problem, and whether all of them settled.
func (a *Agent) WaitOnce(ctx context.Context) ([]OnceResult, bool) {
	for {
		changed := a.Changed() // before looking, so no change is missed
		results, settled := a.onceResults()
		if settled {
			return results, true
		}
		select {
		case <-ctx.Done():
			return results, false
		case <-changed:
		}
	}
}

func (a *Agent) onceResults() ([]OnceResult, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	settled := a.notifyReady
	var results []OnceResult
	for _, p := range a.podsLocked() {
		if p.DeletionTimestamp != nil {
			continue // not desired: an orphan or older generation being removed
		}
		outcome, msg := onceOutcome(&p)
		settled = settled && outcome != OncePending
		results = append(results, OnceResult{Pod: &p, Outcome: outcome, Message: msg})
	}
	for _, pr := range a.problems {
		results = append(results, OnceResult{Problem: &pr, Outcome: OnceInvalid, Message: problemMessage(pr)})
	}
	return results, settled
}

// waitingForever are the waiting reasons that no retry mends without a change
// run --once does not wait for: a new manifest, an image imported by hand
// (the import folder was imported before the pods started).
var waitingForever = []string{reasonConfigError, reasonImageNeverPull}

// onceOutcome is where a pod stands for run --once. As the kubelet's
// runOnce: a pod runs once every regular container runs. Beyond it, a pod
// whose restartPolicy is Never or OnFailure is done once it has finished
// (Succeeded or Failed), and a container that waits for what no retry brings
// fails the pod at once; a crash loop is waited out, as it may mend (an API
// server waiting for etcd).
func onceOutcome(p *v1.Pod) (string, string) {
	all := slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses)
	msg := ""
	for _, cs := range all {
		if w := cs.State.Waiting; w != nil && slices.Contains(waitingForever, w.Reason) {
			return OnceFailed, cs.Name + ": " + w.Reason + ": " + w.Message
		}
		if msg == "" {
			msg = containerMessage(cs)
		}
	}
	switch p.Status.Phase {
	case v1.PodSucceeded:
		return OnceSucceeded, ""
	case v1.PodFailed:
		return OnceFailed, msg
	}
	if p.Spec.RestartPolicy != v1.RestartPolicyAlways && p.Spec.RestartPolicy != "" {
		return OncePending, msg
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Running == nil {
			return OncePending, msg
		}
	}
	if len(p.Status.ContainerStatuses) == 0 {
		return OncePending, msg
	}
	return OnceRunning, ""
}

// containerMessage says why a container does not run: its waiting reason,
// or how it terminated; "" when it runs or has succeeded.
func containerMessage(cs v1.ContainerStatus) string {
	switch {
	case cs.State.Waiting != nil && cs.State.Waiting.Reason != reasonCreating && cs.State.Waiting.Reason != reasonPodInit:
		m := cs.Name + ": " + cs.State.Waiting.Reason
		if cs.State.Waiting.Message != "" {
			m += ": " + cs.State.Waiting.Message
		}
		return m
	case cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0:
		t := cs.State.Terminated
		m := cs.Name + ": " + t.Reason
		if t.Message != "" {
			m += ": " + t.Message
		}
		return m
	}
	return ""
}
