package status

import (
	"time"

	v1 "k8s.io/api/core/v1"
)

// Figures is what the metrics read of a pod with its status: strings,
// numbers and slices of its own, nothing that points into the pod, so that
// a reader of the status manager's pods through Manager.Figures can neither
// change them nor keep them alive. Its strings are the pod's, which no one
// changes; its slices are reused from one pod to the next.
type Figures struct {
	Namespace, Name, UID string
	// Ready: a Ready condition of the pod is True.
	Ready bool
	// CPUQuota: every init and regular container of the spec has a CPU
	// limit, so the pod's cgroup has a quota (the kubelet's
	// ResourceConfigForPod).
	CPUQuota bool
	// InitStatuses and Statuses are status.initContainerStatuses and
	// status.containerStatuses, in their order; Specs are spec.containers,
	// in theirs.
	InitStatuses, Statuses []ContainerFigures
	Specs                  []SpecFigures
}

// ContainerFigures is what the metrics read of a container's status.
type ContainerFigures struct {
	Name, Image  string
	RestartCount int32
	State        StateKind
	// StartedAt is the running state's, when State is StateRunning.
	StartedAt time.Time
}

// StateKind is the state of a container as the kubelet's
// kubelet_running_containers counts it.
type StateKind uint8

const (
	// StateNone: waiting for a container not made yet, or no state.
	StateNone StateKind = iota
	StateRunning
	// StateExited: terminated.
	StateExited
	// StateCreated: waiting, with a container made (it has an ID).
	StateCreated
)

// SpecFigures is what the metrics read of a regular container's spec: its
// resources as the runtime sets them, 0 for none.
type SpecFigures struct {
	Name            string
	MemoryLimit     int64 // bytes
	CPURequestMilli int64
	CPULimitMilli   int64
}

// Read makes f what the metrics read of p, reusing f's slices. It keeps
// nothing of p but strings.
func (f *Figures) Read(p *v1.Pod) {
	f.Namespace, f.Name, f.UID = p.Namespace, p.Name, string(p.UID)
	f.Ready = false
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == v1.PodReady && c.Status == v1.ConditionTrue {
			f.Ready = true
		}
	}
	f.CPUQuota = true
	for _, list := range [2][]v1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range list {
			f.CPUQuota = f.CPUQuota && milli(list[i].Resources.Limits, v1.ResourceCPU) > 0
		}
	}
	f.InitStatuses = readStatuses(f.InitStatuses[:0], p.Status.InitContainerStatuses)
	f.Statuses = readStatuses(f.Statuses[:0], p.Status.ContainerStatuses)
	f.Specs = f.Specs[:0]
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		mem := c.Resources.Limits[v1.ResourceMemory]
		f.Specs = append(f.Specs, SpecFigures{Name: c.Name, MemoryLimit: mem.Value(),
			CPURequestMilli: milli(c.Resources.Requests, v1.ResourceCPU), CPULimitMilli: milli(c.Resources.Limits, v1.ResourceCPU)})
	}
}

// milli is the quantity of name in l in thousandths, 0 when l has none.
func milli(l v1.ResourceList, name v1.ResourceName) int64 {
	q := l[name]
	return q.MilliValue()
}

func readStatuses(out []ContainerFigures, list []v1.ContainerStatus) []ContainerFigures {
	for i := range list {
		cs := &list[i]
		c := ContainerFigures{Name: cs.Name, Image: cs.Image, RestartCount: cs.RestartCount}
		switch {
		case cs.State.Running != nil:
			c.State, c.StartedAt = StateRunning, cs.State.Running.StartedAt.Time
		case cs.State.Terminated != nil:
			c.State = StateExited
		case cs.State.Waiting != nil && cs.ContainerID != "":
			c.State = StateCreated
		}
		out = append(out, c)
	}
	return out
}

// FiguresOf calls f with what the metrics read of each of pods, in their
// order, as Manager.Figures does of its own: fig is f's only while it runs.
func FiguresOf(pods []v1.Pod, f func(fig *Figures)) {
	var fig Figures
	for i := range pods {
		fig.Read(&pods[i])
		f(&fig)
	}
}
