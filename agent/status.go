package agent

import (
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/status"
)

// containerIDPrefix makes runtime IDs look like the kubelet's <runtime>://<id>.
const containerIDPrefix = "staticpodd://"

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
		w.stopping[string(prev.UID)] = terminating(prev)
	}
	w.status = out
	for uid, p := range w.stopping {
		st := w.pods[uid]
		if st == nil || uid == desired {
			delete(w.stopping, uid)
			continue
		}
		refreshStopping(p, st)
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

// terminating is p marked for deletion now, with its grace period.
func terminating(p *v1.Pod) *v1.Pod {
	out := p.DeepCopy()
	if out.DeletionTimestamp == nil {
		now := metav1.Now()
		out.DeletionTimestamp = &now
		out.DeletionGracePeriodSeconds = out.Spec.TerminationGracePeriodSeconds
	}
	return out
}

// refreshStopping shows the containers of a terminating pod that have exited
// since it was published as terminated.
func refreshStopping(p *v1.Pod, st *podState) {
	for _, list := range [][]v1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for i := range list {
			cs := &list[i]
			id := strings.TrimPrefix(cs.ContainerID, containerIDPrefix)
			for _, c := range st.containers {
				if c.ID != id || c.State != podspec.StateExited || cs.State.Terminated != nil {
					continue
				}
				f := false
				cs.State = v1.ContainerState{Terminated: terminated(c)}
				cs.Ready, cs.Started = false, &f
			}
		}
	}
}

// orphanPod is how a pod that an earlier daemon ran and no manifest wants any
// more is shown while it is removed: what its containers' labels tell, with a
// deletionTimestamp. A sandbox without containers is not shown.
func orphanPod(uid string, st *podState) *v1.Pod {
	if len(st.containers) == 0 {
		return nil
	}
	now := metav1.Now()
	grace := int64(adoptedGrace(st.containers) / time.Second)
	pod := &v1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: st.containers[0].PodName, Namespace: st.containers[0].PodNamespace, UID: types.UID(uid),
			DeletionTimestamp: &now,
		},
		Status: v1.PodStatus{Phase: v1.PodSucceeded},
	}
	pod.DeletionGracePeriodSeconds = &grace
	for _, c := range latestByName(st.containers) {
		// What its stop needs of its spec: its preStop hook.
		spec := manifest.RestoreContainer(c.Name, c.Annotations)
		spec.Image = c.Image
		pod.Spec.Containers = append(pod.Spec.Containers, spec)
		cs := v1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: cmp(c.ImageRef, c.ImageID),
			ContainerID: containerIDPrefix + c.ID, RestartCount: int32(c.Attempt)}
		if c.State == podspec.StateExited {
			cs.State.Terminated = terminated(c)
		} else {
			pod.Status.Phase = v1.PodRunning
			cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(c.StartedAt)}
		}
		pod.Status.ContainerStatuses = append(pod.Status.ContainerStatuses, cs)
	}
	slices.SortFunc(pod.Spec.Containers, func(a, b v1.Container) int { return strings.Compare(a.Name, b.Name) })
	slices.SortFunc(pod.Status.ContainerStatuses, func(a, b v1.ContainerStatus) int { return strings.Compare(a.Name, b.Name) })
	return pod
}

// addresses sets status's hostIP(s) and podIP(s). A hostNetwork pod has the
// node's IP; the others have those the pod network gave them, or none
// (podIP stays empty, as the kubelet leaves it for a pod without one) when
// there is no pod network.
func (w *worker) addresses(pod *v1.Pod, st *podState, status *v1.PodStatus) {
	if ip := w.a.cfg.NodeIP; ip.IsValid() {
		status.HostIP = ip.String()
		status.HostIPs = []v1.HostIP{{IP: ip.String()}}
		if pod.Spec.HostNetwork {
			status.PodIP = ip.String()
			status.PodIPs = []v1.PodIP{{IP: ip.String()}}
		}
	}
	if n := st.network; n != nil && !pod.Spec.HostNetwork && st.sandbox {
		for _, ip := range n.IPs {
			status.PodIPs = append(status.PodIPs, v1.PodIP{IP: ip.String()})
		}
		if len(status.PodIPs) > 0 {
			status.PodIP = status.PodIPs[0].IP
		}
	}
}

// reasonNoPodNetwork is the PodReadyToStartContainers condition's reason
// when the pod's sandbox has its loopback only.
const reasonNoPodNetwork = "NoPodNetwork"

// podStatus is the kubelet's generateAPIPodStatus for what the worker knows.
func (w *worker) podStatus(pod *v1.Pod) v1.PodStatus {
	var st *podState
	if w.pods != nil {
		st = w.pods[string(pod.UID)]
	}
	if st == nil {
		st = &podState{}
	}
	latest := latestByName(st.containers)
	if w.gen != nil && w.gen.uid == string(pod.UID) {
		for name, c := range w.gen.final {
			if _, ok := latest[name]; !ok {
				latest[name] = c // removed since it stopped
			}
		}
	}
	status := v1.PodStatus{QOSClass: manifest.QOSClass(pod)}
	if w.gen != nil && !w.gen.startTime.IsZero() {
		t := metav1.NewTime(w.gen.startTime)
		status.StartTime = &t
	}
	w.addresses(pod, st, &status)

	// Once a regular container has been made, the pod stays initialized
	// (the kubelet's HasAnyActiveRegularContainerStarted, for getPhase).
	initialized := slices.ContainsFunc(pod.Spec.Containers, func(c v1.Container) bool { _, ok := latest[c.Name]; return ok })
	// A container never made waits PodInitializing in a pod with init
	// containers, ContainerCreating in one without, whatever the init
	// containers' progress (convertToAPIContainerStatuses' defaultWaitingState).
	pending := ""
	if len(pod.Spec.InitContainers) > 0 {
		pending = reasonPodInit
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := w.containerStatus(c, latest, st, pending)
		if !isSidecar(c) {
			// An init container is ready once it did its part, and only
			// then (the prober manager's UpdatePodStatus).
			t := cs.State.Terminated
			cs.Ready = t != nil && t.ExitCode == 0
		}
		status.InitContainerStatuses = append(status.InitContainerStatuses, cs)
	}
	for i := range pod.Spec.Containers {
		status.ContainerStatuses = append(status.ContainerStatuses, w.containerStatus(&pod.Spec.Containers[i], latest, st, pending))
	}
	// Regular containers by name, init containers in the spec's order
	// (convertToAPIContainerStatuses: SortedContainerStatuses of
	// pkg/kubelet/types/types.go, SortStatusesOfInitContainers).
	slices.SortStableFunc(status.ContainerStatuses, func(a, b v1.ContainerStatus) int { return strings.Compare(a.Name, b.Name) })
	boundMessages(&status, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	status.Phase = podPhase(pod, status, initialized)
	if w.gen != nil && w.gen.uid == string(pod.UID) && w.gen.stop != nil {
		// An internal module evicted it (generateAPIPodStatus).
		status.Phase, status.Reason, status.Message = v1.PodFailed, w.gen.stop.reason, w.gen.stop.message
	}
	status.Resources, status.AllocatedResources = podResourcesStatus(pod)
	status.Conditions = w.conditions(pod, status, st.sandbox)
	if n := st.network; n != nil && n.Message != "" && st.sandbox && !pod.Spec.HostNetwork {
		// The pod runs without a pod network: say why where it shows.
		for i := range status.Conditions {
			if c := &status.Conditions[i]; c.Type == v1.PodReadyToStartContainers {
				c.Reason, c.Message = reasonNoPodNetwork, n.Message
			}
		}
	}
	return status
}

// containerStatus reports one container; a container not started yet waits with
// reason notStarted (ContainerCreating when empty).
func (w *worker) containerStatus(c *v1.Container, latest map[string]podspec.ContainerStatus, st *podState, notStarted string) v1.ContainerStatus {
	cs := v1.ContainerStatus{Name: c.Name, Image: c.Image}
	var ci ctrInfo
	if w.gen != nil && w.gen.ctrs[c.Name] != nil {
		ci = *w.gen.ctrs[c.Name]
	}
	if w.gen != nil && w.gen.convErr[c.Name] != nil {
		ci.reason, ci.message = reasonConfigError, w.gen.convErr[c.Name].Error()
	}
	f := false
	cs.Started = &f
	l, ok := latest[c.Name]
	if !ok {
		reason := ci.reason
		if reason == "" {
			reason = cmp(notStarted, reasonCreating)
		}
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reason, Message: ci.message}
		return cs
	}
	cs.ContainerID = containerIDPrefix + l.ID
	// A container the runtime knows reports the resources it was given: its
	// spec's, which the cgroup has (convertToAPIContainerStatuses with
	// InPlacePodVerticalScaling; a resize is not supported).
	cs.Resources = c.Resources.DeepCopy()
	cs.AllocatedResources = c.Resources.Requests.DeepCopy()
	cs.ImageID = cmp(l.ImageRef, l.ImageID)
	if name := podspec.SignalName(l.StopSignal); name != "" {
		// The effective one, the kubelet's with ContainerStopSignals.
		sig := v1.Signal(name)
		cs.StopSignal = &sig
	}
	cs.RestartCount = int32(l.Attempt)
	if l.Image != "" {
		cs.Image = l.Image
	}
	last := ci.last
	if last == nil {
		last = previous(st.containers, l)
	}
	switch {
	case l.State == podspec.StateCreated || l.State == podspec.StateUnknown:
		// Made but not (known to be) running yet: not ready, not started.
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: reasonCreating}
		if last != nil {
			cs.LastTerminationState.Terminated = terminated(*last)
		}
	case l.State != podspec.StateExited:
		started, ready := w.probeState(c, l.ID)
		if w.hooks.Running(l.ID) {
			started, ready = false, false // until its postStart hook is done
		}
		cs.Started, cs.Ready = &started, ready
		cs.State.Running = &v1.ContainerStateRunning{StartedAt: metav1.NewTime(l.StartedAt)}
		if last != nil {
			cs.LastTerminationState.Terminated = terminated(*last)
		}
	case ci.reason != "" && (w.gen == nil || w.gen.stop == nil) && (ci.reason != reasonPostStartHookError || w.restartable(c, l)):
		cs.State.Waiting = &v1.ContainerStateWaiting{Reason: ci.reason, Message: ci.message}
		cs.LastTerminationState.Terminated = terminated(l)
	default:
		cs.State.Terminated = terminated(l)
		if last != nil {
			cs.LastTerminationState.Terminated = terminated(*last)
		}
	}
	return cs
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

// restartable reports whether exited container l of c will be started
// again: a container that will not is shown terminated, not waiting
// (kubelet convertToAPIContainerStatuses).
func (w *worker) restartable(c *v1.Container, l podspec.ContainerStatus) bool {
	return isSidecar(c) || (w.gen != nil && shouldRestart(w.gen.policy, l.ExitCode))
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

func terminated(c podspec.ContainerStatus) *v1.ContainerStateTerminated {
	reason := c.Reason
	if reason == "" {
		reason = "Error"
		if c.ExitCode == 0 {
			reason = "Completed"
		}
	}
	return &v1.ContainerStateTerminated{
		ExitCode:    int32(c.ExitCode),
		Reason:      reason,
		Message:     c.Message,
		StartedAt:   metav1.NewTime(c.StartedAt),
		FinishedAt:  metav1.NewTime(c.FinishedAt),
		ContainerID: containerIDPrefix + c.ID,
	}
}

// The reasons of pkg/kubelet/status/generate.go for a pod in a terminal phase.
const (
	podCompleted = "PodCompleted"
	podFailed    = "PodFailed"
)

func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// podPhase is the kubelet's getPhase; initialized: a regular container has
// been made.
func podPhase(pod *v1.Pod, s v1.PodStatus, initialized bool) v1.PodPhase {
	var pendingInit, pendingSidecars, failedInit int
	var waiting, running, stopped, succeeded int
	for i, c := range pod.Spec.InitContainers {
		if i >= len(s.InitContainerStatuses) {
			break
		}
		cs := s.InitContainerStatuses[i]
		if isSidecar(&c) {
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
		switch t := cs.State.Terminated; {
		case t != nil && t.ExitCode == 0:
		case t != nil:
			failedInit++
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ExitCode != 0:
			failedInit++
		default:
			pendingInit++
		}
	}
	for _, cs := range s.ContainerStatuses {
		switch {
		case cs.State.Running != nil:
			running++
		case cs.State.Terminated != nil:
			stopped++
			if cs.State.Terminated.ExitCode == 0 {
				succeeded++
			}
		case cs.State.Waiting != nil && cs.LastTerminationState.Terminated != nil:
			stopped++
		default:
			waiting++
		}
	}
	if failedInit > 0 && pod.Spec.RestartPolicy == v1.RestartPolicyNever {
		return v1.PodFailed
	}
	switch {
	case pendingInit > 0 && !initialized, failedInit > 0 && !initialized,
		pendingSidecars > 0 && !initialized, waiting > 0:
		return v1.PodPending
	case running > 0:
		return v1.PodRunning
	case stopped > 0:
		if pod.Spec.RestartPolicy == v1.RestartPolicyAlways {
			return v1.PodRunning
		}
		if stopped == succeeded {
			return v1.PodSucceeded
		}
		if pod.Spec.RestartPolicy == v1.RestartPolicyNever {
			return v1.PodFailed
		}
		return v1.PodRunning
	}
	return v1.PodPending
}

// conditions are the kubelet's pod conditions (generateAPIPodStatus with
// pkg/kubelet/status/generate.go); a transition time moves only when the
// condition's status does.
func (w *worker) conditions(pod *v1.Pod, s v1.PodStatus, sandbox bool) []v1.PodCondition {
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
		case isSidecar(c) && (cs.Started == nil || !*cs.Started), !isSidecar(c) && !cs.Ready:
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
	default:
		initialized.Status, initialized.Reason = v1.ConditionFalse, "ContainersNotInitialized"
		initialized.Message = fmt.Sprintf("containers with incomplete status: %v", notInit)
	}

	// GenerateContainersReadyCondition: sidecars and containers in the spec's
	// order; a pod in a terminal phase is not ready, for that reason alone.
	var notReady []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if cs := statusOf(s.InitContainerStatuses, c.Name); isSidecar(c) && cs != nil && !cs.Ready {
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
	conds := []v1.PodCondition{sb, initialized, ready, ctrsReady, {Type: v1.PodScheduled, Status: v1.ConditionTrue}}
	now := metav1.Now()
	for i := range conds {
		conds[i].LastTransitionTime = now
		if w.prevState == nil {
			continue
		}
		if j := slices.IndexFunc(w.prevState.Conditions, func(p v1.PodCondition) bool { return p.Type == conds[i].Type }); j >= 0 && w.prevState.Conditions[j].Status == conds[i].Status {
			conds[i].LastTransitionTime = w.prevState.Conditions[j].LastTransitionTime
		}
	}
	return conds
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
