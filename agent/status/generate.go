package status

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// ContainerIDPrefix makes runtime IDs look like the kubelet's <runtime>://<id>.
const ContainerIDPrefix = "staticpodd://"

// The reasons of pkg/kubelet/status/generate.go for a pod in a terminal phase.
const (
	podCompleted = "PodCompleted"
	podFailed    = "PodFailed"
)

// PostStartHookError is the waiting reason of a container whose postStart
// hook failed (the kubelet's ErrPostStartHook).
const PostStartHookError = "PostStartHookError"

// Input is what Generate reads of one pod: its spec, what the runtime has of
// it, and what its worker remembers. The caller reads the host and the
// worker; Generate reads only Input.
type Input struct {
	Pod *v1.Pod
	// Containers are every instance the runtime has of the pod's
	// containers, Sandbox whether it has the pod's sandbox and Network that
	// sandbox's place on the pod network (nil: not known).
	Containers []podspec.ContainerStatus
	Sandbox    bool
	Network    *podspec.SandboxStatus
	// NodeIP is the node's address, the hostIP (none when invalid).
	NodeIP netip.Addr
	// Gen is what the worker remembers of the generation it runs; nil:
	// none yet. It may be another UID's than Pod's.
	Gen *Generation
	// Probe says whether running instance id of container c has started
	// and is ready, by its probes and its postStart hook.
	Probe func(c *v1.Container, id string) (started, ready bool)
	// Prev is the status generated before: a condition keeps its
	// transition time while its status stays.
	Prev *v1.PodStatus
	// Now is the transition time of a condition that changed.
	Now time.Time
}

// Generation is what a worker remembers of the generation it runs beyond
// what the runtime reports.
type Generation struct {
	UID    string
	Policy v1.RestartPolicy
	// StartTime is when the agent first took the pod (status.startTime).
	StartTime time.Time
	// Stop, when set, is why the pod is stopped and kept stopped: past its
	// deadline, or evicted.
	Stop *Stop
	// Final is the last status of each container of a stopped pod, shown
	// once the containers are removed.
	Final map[string]podspec.ContainerStatus
	// Containers are, by name, why a container waits and the instance
	// before its current one.
	Containers map[string]Remembered
	// RestartedAll: the pod has restarted all its containers in place
	// (RestartAllContainers); once initialized it stays so meanwhile.
	RestartedAll bool
}

// Stop is why an internal module stopped a pod: the pod's status.reason and
// status.message.
type Stop struct{ Reason, Message string }

// Remembered is what the worker remembers of one container.
type Remembered struct {
	Reason, Message string                   // why it waits, when it does
	Last            *podspec.ContainerStatus // the instance before the current one
	// RestartCount is the restartCount of a container none of whose
	// instances is left but Last (removed to restart all the pod's
	// containers): the attempt it starts as next.
	RestartCount int
}

// Generate is the kubelet's generateAPIPodStatus for in.
func Generate(in Input) v1.PodStatus {
	pod := in.Pod
	latest := LatestByName(in.Containers)
	if in.Gen != nil && in.Gen.UID == string(pod.UID) {
		for name, c := range in.Gen.Final {
			if _, ok := latest[name]; !ok {
				latest[name] = c // removed since it stopped
			}
		}
	}
	status := v1.PodStatus{QOSClass: manifest.QOSClass(pod)}
	if in.Gen != nil && !in.Gen.StartTime.IsZero() {
		t := metav1.NewTime(in.Gen.StartTime)
		status.StartTime = &t
	}
	in.addresses(&status)

	// Once a regular container has been made, the pod stays initialized
	// (the kubelet's HasAnyActiveRegularContainerStarted, for getPhase).
	initialized := slices.ContainsFunc(pod.Spec.Containers, func(c v1.Container) bool { _, ok := latest[c.Name]; return ok })
	// A container never made waits PodInitializing in a pod with init
	// containers, ContainerCreating in one without, whatever the init
	// containers' progress (convertToAPIContainerStatuses' defaultWaitingState).
	pending := ""
	if len(pod.Spec.InitContainers) > 0 {
		pending = PodInitializing
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := in.containerStatus(c, latest, pending)
		if !IsSidecar(c) {
			// An init container is ready once it did its part, and only
			// then (the prober manager's UpdatePodStatus).
			t := cs.State.Terminated
			cs.Ready = t != nil && t.ExitCode == 0
		}
		status.InitContainerStatuses = append(status.InitContainerStatuses, cs)
	}
	for i := range pod.Spec.Containers {
		status.ContainerStatuses = append(status.ContainerStatuses, in.containerStatus(&pod.Spec.Containers[i], latest, pending))
	}
	// Regular containers by name, init containers in the spec's order
	// (convertToAPIContainerStatuses: SortedContainerStatuses of
	// pkg/kubelet/types/types.go, SortStatusesOfInitContainers).
	slices.SortStableFunc(status.ContainerStatuses, func(a, b v1.ContainerStatus) int { return strings.Compare(a.Name, b.Name) })
	boundMessages(&status, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	status.Phase = Phase(pod, status, initialized)
	if in.Gen != nil && in.Gen.UID == string(pod.UID) && in.Gen.Stop != nil {
		// An internal module evicted it (generateAPIPodStatus).
		status.Phase, status.Reason, status.Message = v1.PodFailed, in.Gen.Stop.Reason, in.Gen.Stop.Message
	}
	status.Resources, status.AllocatedResources = podResourcesStatus(pod)
	status.Conditions = conditions(pod, status, in.Sandbox, in.Prev, in.restartedAll())
	if CouldRestartAll(pod) {
		status.Conditions = append(status.Conditions, in.allContainersRestarting(status.Phase))
	}
	keepTransitions(status.Conditions, in.Prev, in.Now)
	if n := in.Network; n != nil && n.Message != "" && in.Sandbox && !pod.Spec.HostNetwork {
		// The pod runs without a pod network: say why where it shows.
		for i := range status.Conditions {
			if c := &status.Conditions[i]; c.Type == v1.PodReadyToStartContainers {
				c.Reason, c.Message = NoPodNetwork, n.Message
			}
		}
	}
	return status
}

// addresses sets status's addresses (Addresses).
func (in *Input) addresses(status *v1.PodStatus) {
	Addresses(in.Pod, in.NodeIP, in.Sandbox, in.Network, status)
}

// Addresses sets status's hostIP(s) and podIP(s), of pod on the node of
// nodeIP. A hostNetwork pod has the node's IP; the others have those the
// pod network gave their sandbox (n), or none (podIP stays empty, as the
// kubelet leaves it for a pod without one) when there is no pod network.
func Addresses(pod *v1.Pod, nodeIP netip.Addr, sandbox bool, n *podspec.SandboxStatus, status *v1.PodStatus) {
	if ip := nodeIP; ip.IsValid() {
		status.HostIP = ip.String()
		status.HostIPs = []v1.HostIP{{IP: ip.String()}}
		if pod.Spec.HostNetwork {
			status.PodIP = ip.String()
			status.PodIPs = []v1.PodIP{{IP: ip.String()}}
		}
	}
	if n != nil && !pod.Spec.HostNetwork && sandbox {
		for _, ip := range n.IPs {
			status.PodIPs = append(status.PodIPs, v1.PodIP{IP: ip.String()})
		}
		if len(status.PodIPs) > 0 {
			status.PodIP = status.PodIPs[0].IP
		}
	}
}

// containerStatus reports one container; a container not started yet waits with
// reason notStarted (ContainerCreating when empty).
func (in *Input) containerStatus(c *v1.Container, latest map[string]podspec.ContainerStatus, notStarted string) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	var ci Remembered
	if in.Gen != nil {
		ci = in.Gen.Containers[c.Name]
	}
	f := false
	cs.Started = &f
	l, ok := latest[c.Name]
	if !ok {
		reason := ci.Reason
		if reason == "" {
			reason = or(notStarted, ContainerCreating)
		}
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reason, Message: ci.Message}
		if ci.Last != nil {
			// Removed to restart all the pod's containers: it ran before.
			cs.LastTerminationState.Terminated = Terminated(*ci.Last)
			cs.RestartCount = int32(ci.RestartCount)
		}
		return cs
	}
	cs.ContainerID = ContainerIDPrefix + l.ID
	// A container the runtime knows reports the resources it was given: its
	// spec's, which the cgroup has (convertToAPIContainerStatuses with
	// InPlacePodVerticalScaling; a resize is not supported).
	cs.Resources = c.Resources.DeepCopy()
	cs.AllocatedResources = c.Resources.Requests.DeepCopy()
	cs.ImageID = or(l.ImageRef, l.ImageID)
	if name := podspec.SignalName(l.StopSignal); name != "" {
		// The effective one, the kubelet's with ContainerStopSignals.
		sig := v1.Signal(name)
		cs.StopSignal = &sig
	}
	cs.RestartCount = int32(l.Attempt)
	if l.Image != "" {
		cs.Image = l.Image
	}
	last := ci.Last
	if last == nil {
		last = previous(in.Containers, l)
	}
	switch {
	case l.State == podspec.StateCreated || l.State == podspec.StateUnknown:
		// Made but not (known to be) running yet: not ready, not started.
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: ContainerCreating}
		if last != nil {
			cs.LastTerminationState.Terminated = Terminated(*last)
		}
	case l.State != podspec.StateExited:
		started, ready := in.Probe(c, l.ID)
		cs.Started, cs.Ready = &started, ready
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(l.StartedAt)}
		if last != nil {
			cs.LastTerminationState.Terminated = Terminated(*last)
		}
	case ci.Reason != "" && (in.Gen == nil || in.Gen.Stop == nil) && (ci.Reason != PostStartHookError || in.restartable(c, l)):
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: ci.Reason, Message: ci.Message}
		cs.LastTerminationState.Terminated = Terminated(l)
	default:
		cs.State.Terminated = Terminated(l)
		if last != nil {
			cs.LastTerminationState.Terminated = Terminated(*last)
		}
	}
	return cs
}

// restartable reports whether exited container l of c will be started
// again: a container that will not is shown terminated, not waiting
// (kubelet convertToAPIContainerStatuses).
func (in *Input) restartable(c *v1.Container, l podspec.ContainerStatus) bool {
	return IsSidecar(c) || (in.Gen != nil && ContainerShouldRestart(c, in.Gen.Policy, l.ExitCode))
}

// restartedAll reports whether the pod of in has restarted all its
// containers in place (Generation.RestartedAll).
func (in *Input) restartedAll() bool {
	return in.Gen != nil && in.Gen.UID == string(in.Pod.UID) && in.Gen.RestartedAll
}

// allContainersRestarting is the kubelet's AllContainersRestarting
// condition (GenerateAllContainersRestartingCondition): true while the
// newest instance of a container that exited with a code one of its
// RestartAllContainers rules matches is still there, before the pod's
// containers are removed to start again; false in a terminal phase, for
// that reason.
func (in *Input) allContainersRestarting(phase v1.PodPhase) v1.PodCondition {
	cond := v1.PodCondition{Type: v1.AllContainersRestarting, Status: v1.ConditionFalse}
	switch phase {
	case v1.PodSucceeded:
		cond.Reason = podCompleted
		return cond
	case v1.PodFailed:
		cond.Reason = podFailed
		return cond
	}
	latest := LatestByName(in.Containers)
	for _, c := range manifest.AllContainers(in.Pod) {
		if l, ok := latest[c.Name]; ok && l.State == podspec.StateExited && RestartsAll(c, l.ExitCode) {
			cond.Status, cond.Reason, cond.Message = v1.ConditionTrue, restartAllContainersStarted, restartAllContainersMessage
			break
		}
	}
	return cond
}

// podResourcesStatus is the pod's status.resources and
// status.allocatedResources as the kubelet reports them for a pod whose API
// phase is not Running, which a static pod's never is (convertStatusToAPIStatus,
// getEffectiveAllocatedResources): the pod-level resources with their requests
// and limits made the pod's effective ones (resourcehelper's PodRequests and
// PodLimits, pod-level resources honoured).
func podResourcesStatus(pod *v1.Pod) (*v1.ResourceRequirements, v1.ResourceList) {
	r := pod.Spec.Resources.DeepCopy()
	if r == nil {
		r = &v1.ResourceRequirements{}
	}
	opts := resourcehelper.PodResourcesOptions{}
	r.Requests = resourcehelper.PodRequests(pod, opts)
	r.Limits = resourcehelper.PodLimits(pod, opts)
	return r, resourcehelper.PodRequests(pod, opts)
}

// boundMessages cuts the message of each terminated state of s, current and
// last, to the pod's share of podspec.MaxPodTerminationMessages per container
// (the kubelet's normalizeStatus), and each waiting state's message, which
// may quote a registry, a plugin or a hook, to podspec.MaxStatusMessage.
func boundMessages(s *v1.PodStatus, containers int) {
	limit := podspec.MaxPodTerminationMessages / max(containers, 1)
	for _, list := range [][]v1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for i := range list {
			for _, t := range []*v1.ContainerStateTerminated{list[i].State.Terminated, list[i].LastTerminationState.Terminated} {
				if t != nil {
					t.Message = podspec.Truncate(t.Message, limit)
				}
			}
			if w := list[i].State.Waiting; w != nil {
				w.Message = podspec.Truncate(w.Message, podspec.MaxStatusMessage)
			}
		}
	}
}

// previous is the newest exited instance of l's container older than l.
func previous(cs []podspec.ContainerStatus, l podspec.ContainerStatus) *podspec.ContainerStatus {
	var p *podspec.ContainerStatus
	for i := range cs {
		c := cs[i]
		if c.Name != l.Name || c.ID == l.ID || c.State != podspec.StateExited || c.Attempt > l.Attempt {
			continue
		}
		if p == nil || c.Attempt > p.Attempt {
			p = &c
		}
	}
	return p
}

// Terminated is the terminated state of exited container c.
func Terminated(c podspec.ContainerStatus) *v1.ContainerStateTerminated {
	reason := c.Reason
	if reason == "" {
		reason = "Error"
		if c.ExitCode == 0 {
			reason = "Completed"
		}
	}
	t := &v1.ContainerStateTerminated{
		ExitCode:   int32(c.ExitCode),
		Reason:     reason,
		Message:    c.Message,
		StartedAt:  metav1.NewTime(c.StartedAt),
		FinishedAt: metav1.NewTime(c.FinishedAt),
	}
	if c.ID != "" {
		// One removed to restart all has none, as the kubelet's.
		t.ContainerID = ContainerIDPrefix + c.ID
	}
	return t
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// Phase is the kubelet's getPhase (ContainerRestartRules on); initialized:
// a regular container has been made.
func Phase(pod *v1.Pod, s v1.PodStatus, initialized bool) v1.PodPhase {
	var pendingInit, pendingSidecars, failedInit int
	var waiting, running, stopped, stoppedForGood, succeeded int
	// restartable: an exit t of c is followed by a start, by c's rules and
	// policies, or because all the pod's containers restart.
	restartable := func(c *v1.Container, t *v1.ContainerStateTerminated) bool {
		return t.Reason == RestartingAllContainers || ContainerShouldRestart(c, pod.Spec.RestartPolicy, int(t.ExitCode))
	}
	for i, c := range pod.Spec.InitContainers {
		if i >= len(s.InitContainerStatuses) {
			break
		}
		cs := s.InitContainerStatuses[i]
		if IsSidecar(&c) {
			// Terminated sidecars do not count for the phase.
			switch {
			case cs.State.Running != nil:
				if cs.Started == nil || !*cs.Started {
					pendingSidecars++
				}
				running++
			case cs.State.Waiting != nil && cs.LastTerminationState.Terminated == nil:
				pendingSidecars++
				waiting++
			}
			continue
		}
		var t *v1.ContainerStateTerminated
		switch {
		case cs.State.Terminated != nil:
			t = cs.State.Terminated
		case cs.State.Waiting != nil:
			t = cs.LastTerminationState.Terminated
		}
		switch {
		case t == nil:
			pendingInit++
		case t.Reason == RestartingAllContainers:
			// Removed to restart all: it runs again, it did not fail.
		case t.ExitCode == 0 && cs.State.Terminated != nil:
		case t.ExitCode == 0:
			pendingInit++ // waiting to run again
		case !restartable(&c, t):
			return v1.PodFailed
		default:
			failedInit++
		}
	}
	for _, cs := range s.ContainerStatuses {
		c := findSpec(pod.Spec.Containers, cs.Name)
		var t *v1.ContainerStateTerminated
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			t = cs.State.Terminated
			if t.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			t = cs.LastTerminationState.Terminated
		default:
			waiting++
		}
		if t != nil {
			stopped++
			if c != nil && !restartable(c, t) {
				stoppedForGood++
			}
		}
	}
	switch {
	case pendingInit > 0 && !initialized, failedInit > 0 && !initialized,
		pendingSidecars > 0 && !initialized, waiting > 0:
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case stopped > 0:
		if stopped != stoppedForGood {
			return v1.PodRunning // one at least restarts
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		return v1.PodFailed
	}
	return v1.PodPending
}

// findSpec is the container named name of list; nil if none.
func findSpec(list []v1.Container, name string) *v1.Container {
	if i := slices.IndexFunc(list, func(c v1.Container) bool { return c.Name == name }); i >= 0 {
		return &list[i]
	}
	return nil
}

// conditions are the kubelet's pod conditions (generateAPIPodStatus with
// pkg/kubelet/status/generate.go) but AllContainersRestarting, without
// their transition times. restartedAll: the pod restarted all its
// containers in place, so it stays initialized if it was (prev).
func conditions(pod *v1.Pod, s v1.PodStatus, sandbox bool, prev *v1.PodStatus, restartedAll bool) []v1.PodCondition {
	statusOf := func(list []v1.ContainerStatus, name string) *v1.ContainerStatus {
		if i := slices.IndexFunc(list, func(cs v1.ContainerStatus) bool { return cs.Name == name }); i >= 0 {
			return &list[i]
		}
		return nil
	}
	// GeneratePodInitializedCondition: a sidecar counts once started, an init
	// container once ready (exited 0); a regular container that ran means
	// the pod was initialized before (HasAnyRegularContainerStarted).
	var notInit []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := statusOf(s.InitContainerStatuses, c.Name)
		switch {
		case cs == nil:
		case IsSidecar(c) && (cs.Started == nil || !*cs.Started), !IsSidecar(c) && !cs.Ready:
			notInit = append(notInit, c.Name)
		}
	}
	regularRan := slices.ContainsFunc(s.ContainerStatuses, func(cs v1.ContainerStatus) bool {
		return cs.State.Running != nil || cs.State.Terminated != nil
	})
	initialized := v1.PodCondition{Type: v1.PodInitialized, Status: v1.ConditionTrue}
	switch {
	case s.Phase == v1.PodSucceeded:
		initialized.Reason = podCompleted
	case regularRan || len(notInit) == 0:
	case restartedAll && prev != nil && slices.ContainsFunc(prev.Conditions, func(c v1.PodCondition) bool {
		return c.Type == v1.PodInitialized && c.Status == v1.ConditionTrue
	}):
		// Its init containers run again: it is not uninitialized
		// (GeneratePodInitializedCondition with RestartAllContainers).
	default:
		initialized.Status, initialized.Reason = v1.ConditionFalse, "ContainersNotInitialized"
		initialized.Message = fmt.Sprintf("containers with incomplete status: %v", notInit)
	}

	// GenerateContainersReadyCondition: sidecars and containers in the spec's
	// order; a pod in a terminal phase is not ready, for that reason alone.
	var notReady []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if cs := statusOf(s.InitContainerStatuses, c.Name); IsSidecar(c) && cs != nil && !cs.Ready {
			notReady = append(notReady, c.Name)
		}
	}
	for i := range pod.Spec.Containers {
		if cs := statusOf(s.ContainerStatuses, pod.Spec.Containers[i].Name); cs != nil && !cs.Ready {
			notReady = append(notReady, cs.Name)
		}
	}
	ctrsReady := v1.PodCondition{Type: v1.ContainersReady, Status: v1.ConditionTrue}
	switch {
	case s.Phase == v1.PodSucceeded:
		ctrsReady.Status, ctrsReady.Reason = v1.ConditionFalse, podCompleted
	case s.Phase == v1.PodFailed:
		ctrsReady.Status, ctrsReady.Reason = v1.ConditionFalse, podFailed
	case len(notReady) > 0:
		ctrsReady.Status, ctrsReady.Reason = v1.ConditionFalse, "ContainersNotReady"
		ctrsReady.Message = fmt.Sprintf("containers with unready status: %v", notReady)
	}

	// GeneratePodReadyCondition: ContainersReady's verdict, then the pod's
	// readiness gates, whose conditions nothing sets on a static pod.
	ready := ctrsReady
	ready.Type = v1.PodReady
	if ready.Status == v1.ConditionTrue && len(pod.Spec.ReadinessGates) > 0 {
		var msgs []string
		for _, g := range pod.Spec.ReadinessGates {
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", string(g.ConditionType)))
		}
		ready.Status, ready.Reason, ready.Message = v1.ConditionFalse, "ReadinessGatesNotReady", strings.Join(msgs, ", ")
	}

	// GeneratePodReadyToStartContainersCondition: true while the pod has its
	// sandbox.
	sb := v1.PodCondition{Type: v1.PodReadyToStartContainers, Status: v1.ConditionTrue}
	if !sandbox {
		sb.Status, sb.Reason, sb.Message = v1.ConditionFalse, "PodSandboxNotReady", "no pod sandbox exists"
	}
	return []v1.PodCondition{sb, initialized, ready, ctrsReady, {Type: v1.PodScheduled, Status: v1.ConditionTrue}}
}

// keepTransitions sets the transition time of each of conds: it moves only
// when the condition's status does (from prev's), to now.
func keepTransitions(conds []v1.PodCondition, prev *v1.PodStatus, now time.Time) {
	for i := range conds {
		conds[i].LastTransitionTime = metav1.NewTime(now)
		if prev == nil {
			continue
		}
		if j := slices.IndexFunc(prev.Conditions, func(p v1.PodCondition) bool { return p.Type == conds[i].Type }); j >= 0 && prev.Conditions[j].Status == conds[i].Status {
			conds[i].LastTransitionTime = prev.Conditions[j].LastTransitionTime
		}
	}
}

// Terminating is p marked for deletion at now, with its grace period: an
// older generation while it stops.
func Terminating(p *v1.Pod, now time.Time) *v1.Pod {
	out := p.DeepCopy()
	if out.DeletionTimestamp == nil {
		t := metav1.NewTime(now)
		out.DeletionTimestamp = &t
		out.DeletionGracePeriodSeconds = out.Spec.TerminationGracePeriodSeconds
	}
	return out
}

// RefreshTerminating is terminating pod p with the containers that have
// exited, of cs (the runtime's), since it was published shown terminated;
// p itself when none has. p is not changed.
func RefreshTerminating(p *v1.Pod, cs []podspec.ContainerStatus) *v1.Pod {
	lists := func(q *v1.Pod) [][]v1.ContainerStatus {
		return [][]v1.ContainerStatus{q.Status.InitContainerStatuses, q.Status.ContainerStatuses}
	}
	var out *v1.Pod
	for l, list := range lists(p) {
		for i := range list {
			if list[i].State.Terminated != nil {
				continue
			}
			id := strings.TrimPrefix(list[i].ContainerID, ContainerIDPrefix)
			for _, c := range cs {
				if c.ID != id || c.State != podspec.StateExited {
					continue
				}
				if out == nil {
					out = p.DeepCopy()
				}
				f := false
				s := &lists(out)[l][i]
				s.State = v1.ContainerState{Terminated: Terminated(c)}
				s.Ready, s.Started = false, &f
				break
			}
		}
	}
	if out == nil {
		return p
	}
	return out
}

// Orphan is how a pod that an earlier daemon ran and no manifest wants any
// more is shown while it is removed: what its containers cs (their labels)
// tell, with a deletionTimestamp of now and grace, the longest they were
// started with. A sandbox without containers is not shown (nil).
func Orphan(uid string, cs []podspec.ContainerStatus, grace time.Duration, now time.Time) *v1.Pod {
	if len(cs) == 0 {
		return nil
	}
	t := metav1.NewTime(now)
	secs := int64(grace / time.Second)
	pod := &v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: cs[0].PodName, Namespace: cs[0].PodNamespace, UID: types.UID(uid),
			DeletionTimestamp: &t,
		},
		Status: v1.PodStatus{Phase: v1.PodSucceeded},
	}
	pod.DeletionGracePeriodSeconds = &secs
	for _, c := range LatestByName(cs) {
		// What its stop needs of its spec: its preStop hook.
		spec := manifest.RestoreContainer(c.Name, c.Annotations)
		spec.Image = c.Image
		pod.Spec.Containers = append(pod.Spec.Containers, spec)
		s := v1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: or(c.ImageRef, c.ImageID),
			ContainerID: ContainerIDPrefix + c.ID, RestartCount: int32(c.Attempt)}
		if c.State == podspec.StateExited {
			s.State.Terminated = Terminated(c)
		} else {
			pod.Status.Phase = v1.PodRunning
			s.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, s)
	}
	slices.SortFunc(pod.Spec.Containers, func(a, b v1.Container) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(pod.Status.ContainerStatuses, func(a, b v1.ContainerStatus) int { return strings.Compare(a.Name, b.Name) })
	return pod
}

// IsSidecar reports whether c is a restartable init container.
func IsSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// ShouldRestart reports whether a container that exited with exitCode is
// started again under policy.
func ShouldRestart(policy v1.RestartPolicy, exitCode int) bool {
	switch policy {
	case v1.RestartPolicyNever:
		return false
	case v1.RestartPolicyOnFailure:
		return exitCode != 0
	default:
		return true
	}
}

// LatestIndex is the index in cs of the instance of container name that
// LatestByName gives, -1 for none; it allocates nothing.
func LatestIndex(cs []podspec.ContainerStatus, name string) int {
	at := -1
	for i := range cs {
		c := &cs[i]
		if c.Name != name {
			continue
		}
		if at < 0 || c.Attempt > cs[at].Attempt || (c.Attempt == cs[at].Attempt && c.CreatedAt.After(cs[at].CreatedAt)) {
			at = i
		}
	}
	return at
}

// LatestByName returns, per container name, the instance with the highest attempt
// (the newest created on a tie).
func LatestByName(cs []podspec.ContainerStatus) map[string]podspec.ContainerStatus {
	m := map[string]podspec.ContainerStatus{}
	for _, c := range cs {
		l, ok := m[c.Name]
		if !ok || c.Attempt > l.Attempt || (c.Attempt == l.Attempt && c.CreatedAt.After(l.CreatedAt)) {
			m[c.Name] = c
		}
	}
	return m
}
