package agent

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/status"
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
	for _, p := range a.statuses.Pods() {
		if p.DeletionTimestamp != nil {
			continue // not desired: an orphan or older generation being removed
		}
		outcome, msg := onceOutcome(&p)
		if e := a.order.Blocked[p.Namespace+"/"+p.Name]; e != nil && outcome == OncePending {
			// Its start order waits for what only a manifest mends: a
			// cycle, a pod no manifest defines.
			outcome, msg = OnceFailed, e.Reason
		}
		settled = settled && outcome != OncePending
		results = append(results, OnceResult{Pod: &p, Outcome: outcome, Message: msg})
	}
	for _, pr := range a.problems {
		if pr.Warning {
			continue // its pod runs, and is among the results
		}
		results = append(results, OnceResult{Problem: &pr, Outcome: OnceInvalid, Message: problemMessage(pr)})
	}
	return results, settled
}

// onceOutcome is where a pod stands for run --once. As the kubelet's
// runOnce: a pod runs once every regular container runs. Beyond it, a pod
// whose restartPolicy is Never or OnFailure is done once it has finished
// (Succeeded or Failed), and a container that waits for what no retry brings
// (a new manifest, an image imported by hand: the import folder was imported
// before the pods started) fails the pod at once; a crash loop is waited
// out, as it may mend (an API server waiting for etcd).
func onceOutcome(p *v1.Pod) (string, string) {
	c := status.Classify(p)
	switch {
	case c.Stuck != "":
		return OnceFailed, c.Stuck
	case c.Phase == v1.PodSucceeded:
		return OnceSucceeded, ""
	case c.Phase == v1.PodFailed:
		return OnceFailed, c.Message
	case c.Finishes, !c.Running:
		return OncePending, c.Message
	}
	return OnceRunning, ""
}
