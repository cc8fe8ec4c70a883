// Package status owns a static pod's status, as the kubelet's
// pkg/kubelet/status does. Generate is the kubelet's generateAPIPodStatus: a
// pod's v1.PodStatus from what its worker knows (the runtime's containers,
// the generation it runs, its probes), with the shapes of the older
// generations it still stops (Terminating, Orphan). Manager is the one cache
// of what is published, by pod UID under its worker's key, with a version:
// it refuses illegal transitions, and every reader reads it, through one
// subscription (Watch, Changed) and the STATUS line it keeps (Line).
// Classify answers "is this pod OK?" from a pod's v1.PodStatus alone, for
// run --once, --ready-when, the systemd STATUS line and `staticpodd ps`; the
// reasons (Evicted, DeadlineExceeded, the waiting reasons) are defined here
// once. It is pure: it reads values, never the host.
//
// Each reader keeps its own question, as the kubelet's readers do, and
// answers it with a switch on one Class:
//
//   - run --once (agent/once.go, the kubelet's runOnce): a pod fails at once
//     when a container waits for what no retry mends (Stuck); else it is
//     done when its phase is Succeeded or Failed; a pod whose restartPolicy
//     is Never or OnFailure (Finishes) is pending until then; a pod with
//     restartPolicy Always runs once it has regular containers and each runs
//     (Running). Message says why it failed or still waits.
//   - --ready-when (agent/ready): pods-running is met by
//     phase Succeeded, or phase Running with every regular container running
//     or terminated between restarts (Up); pods-ready by the PodReady
//     condition (Ready). Not yet met, a pod has failed when its phase is
//     Failed, or its first regular container that waits (with a reason) or
//     has restarted does so for a hopeless reason or after a restart
//     (Containers); a readiness probe's failure is read by the caller.
//   - the STATUS line (the Manager's tally): a pod whose container
//     waits for something other than its turn is counted waiting, with that
//     reason (Waiting); every other one by its phase.
//   - `staticpodd ps`: the STATUS column as kubectl prints it (Display).
//
// /healthz does not judge pods: it answers for the daemon's loop and parts.
//
// They differ on purpose and Class keeps each answer: a crash loop or an
// image pull back-off is waited out by run --once (it may mend, an API
// server waiting for etcd) but ends --ready-when's start-timeout extensions;
// pods-running counts a container terminated between restarts as up, run
// --once does not; the STATUS line counts a waiting pod as waiting whatever
// its phase, ps shows a failed pod's own reason first.
package status

import (
	"cmp"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Class is what one pod's status says of it.
type Class struct {
	Phase v1.PodPhase
	// Terminating: the pod has a deletionTimestamp, an orphan or an older
	// generation being removed.
	Terminating bool
	// Reason is why the pod failed as a whole (Evicted, DeadlineExceeded);
	// "" for a pod not Failed or whose containers failed it.
	Reason string
	// Finishes: restartPolicy Never or OnFailure, so the pod ends on its
	// own; Always, or none given, it does not.
	Finishes bool
	// Running: the pod has regular containers and every one runs.
	Running bool
	// Up: every regular container runs or has terminated (one crash
	// looping between restarts, or one done); true without any.
	Up bool
	// Ready: the PodReady condition is True.
	Ready bool
	// Stuck is "name: reason: message" of the first container (init
	// containers first) that waits for what no retry mends without a
	// change (CreateContainerConfigError, ErrImageNeverPull); "" for none.
	Stuck string
	// Message says why the pod does not run: the first container's (init
	// containers first) waiting reason other than its turn, or failed
	// termination, as "name: reason: message"; "" for none.
	Message string
	// Waiting is the reason the first waiting container (init containers
	// first) waits for, when it is something other than its turn; "" for
	// none.
	Waiting string
	// Containers are the regular containers, in the status's order.
	Containers []Container
	// Display is the STATUS column as kubectl prints it: Terminating, the
	// reason a container waits or stopped, Init:n/m while init containers
	// run, a failed pod's own reason, else the phase.
	Display string
}

// Container is what one regular container's status says of it.
type Container struct {
	Name string
	// Waiting is its waiting reason; "" when it does not wait or gives none.
	Waiting string
	// Hopeless: Waiting will not pass by waiting longer (it failed, or
	// backs off after failing).
	Hopeless bool
	Restarts int32
	Running  bool
	Ready    bool
}

// Classify is what p's status says of it. It reads p and keeps nothing of it.
func Classify(p *v1.Pod) Class {
	s := &p.Status
	c := Class{
		Phase:       s.Phase,
		Terminating: p.DeletionTimestamp != nil,
		Finishes:    p.Spec.RestartPolicy != v1.RestartPolicyAlways && p.Spec.RestartPolicy != "",
		Running:     len(s.ContainerStatuses) > 0,
		Up:          true,
		Display:     display(p),
	}
	if s.Phase == v1.PodFailed {
		c.Reason = s.Reason
	}
	waitSeen := false
	for i := range len(s.InitContainerStatuses) + len(s.ContainerStatuses) {
		cs := containerAt(s, i)
		if w := cs.State.Waiting; w != nil {
			if c.Stuck == "" && mendless(w.Reason) {
				c.Stuck = cs.Name + ": " + w.Reason + ": " + w.Message
			}
			// The first waiting container not waiting its turn decides,
			// even when it gives no reason.
			if !waitSeen && !turn(w.Reason) {
				c.Waiting, waitSeen = w.Reason, true
			}
		}
		if c.Message == "" {
			c.Message = message(*cs)
		}
	}
	for _, cs := range s.ContainerStatuses {
		if cs.State.Running == nil {
			c.Running = false
			if cs.State.Terminated == nil {
				c.Up = false
			}
		}
		ct := Container{Name: cs.Name, Restarts: cs.RestartCount, Running: cs.State.Running != nil, Ready: cs.Ready}
		if w := cs.State.Waiting; w != nil {
			ct.Waiting, ct.Hopeless = w.Reason, hopeless(w.Reason)
		}
		c.Containers = append(c.Containers, ct)
	}
	c.Ready = Ready(p)
	return c
}

// Ready reports whether p's Ready condition is true (Class.Ready), without
// classifying the rest.
func Ready(p *v1.Pod) bool {
	for i := range p.Status.Conditions {
		if cond := &p.Status.Conditions[i]; cond.Type == v1.PodReady {
			return cond.Status == v1.ConditionTrue
		}
	}
	return false
}

// containerAt is the status of the i-th of s's init containers then its
// containers.
func containerAt(s *v1.PodStatus, i int) *v1.ContainerStatus {
	if i < len(s.InitContainerStatuses) {
		return &s.InitContainerStatuses[i]
	}
	return &s.ContainerStatuses[i-len(s.InitContainerStatuses)]
}

// message says why a container does not run: its waiting reason, or how it
// terminated; "" when it runs, has succeeded or waits its turn.
func message(cs v1.ContainerStatus) string {
	switch {
	case cs.State.Waiting != nil && !turn(cs.State.Waiting.Reason):
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

// display is the STATUS column as kubectl prints it (kubectl's
// printers/internalversion printPod): the reason a container waits or
// stopped, Init:n/m while init containers run, else the phase.
func display(p *v1.Pod) string {
	if p.DeletionTimestamp != nil {
		return "Terminating"
	}
	for i, cs := range p.Status.InitContainerStatuses {
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0:
			continue
		case cs.State.Terminated != nil:
			return "Init:" + cmp.Or(cs.State.Terminated.Reason, fmt.Sprintf("ExitCode:%d", cs.State.Terminated.ExitCode))
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "" && cs.State.Waiting.Reason != PodInitializing:
			return "Init:" + cs.State.Waiting.Reason
		default:
			return fmt.Sprintf("Init:%d/%d", i, len(p.Spec.InitContainers))
		}
	}
	if p.Status.Phase == v1.PodFailed && p.Status.Reason != "" {
		return p.Status.Reason // Evicted, DeadlineExceeded: why it failed as a whole
	}
	reason := string(p.Status.Phase)
	running := false
	for i := len(p.Status.ContainerStatuses) - 1; i >= 0; i-- {
		cs := p.Status.ContainerStatuses[i]
		switch {
		case cs.State.Waiting != nil && cs.State.Waiting.Reason != "":
			reason = cs.State.Waiting.Reason
		case cs.State.Terminated != nil:
			reason = cmp.Or(cs.State.Terminated.Reason, fmt.Sprintf("ExitCode:%d", cs.State.Terminated.ExitCode))
		case cs.State.Running != nil && cs.Ready:
			running = true
		}
	}
	if running && reason == "Completed" {
		reason = string(v1.PodRunning)
	}
	return reason
}
