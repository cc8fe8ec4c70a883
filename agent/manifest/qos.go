package manifest

import (
	"strings"

	v1 "k8s.io/api/core/v1"
)

// The kubelet's OOM score adjustments (pkg/kubelet/qos/policy.go).
const (
	guaranteedOOMScoreAdj = -997
	besteffortOOMScoreAdj = 1000
)

// systemNodeCritical is the priority class name of node-critical pods.
const systemNodeCritical = "system-node-critical"

// QOSClass is the pod's quality of service class, computed from its requests and
// limits as the kubelet's ComputePodQOS (pkg/apis/core/v1/helper/qos) does with
// its default feature gates (PodLevelResources and PodLevelResourcesFixKubeletQOSClass
// on): pod-level cpu or memory resources decide when set; otherwise BestEffort
// when no container sets cpu or memory, Guaranteed when every container's cpu and
// memory requests equal their limits, Burstable otherwise. Init containers count.
// It is the value of the pod's status.qosClass. pod.Status.QOSClass is not
// consulted: the answer comes from the spec alone.
func QOSClass(pod *v1.Pod) v1.PodQOSClass {
	if podLevelResourcesSet(pod) {
		return requirementsQOS(pod.Spec.Resources)
	}
	var class v1.PodQOSClass
	for _, c := range AllContainers(pod) {
		q := requirementsQOS(&c.Resources)
		switch {
		case q == v1.PodQOSBurstable:
			return q
		case class == "":
			class = q
		case class != q:
			return v1.PodQOSBurstable
		}
	}
	if class == "" {
		class = v1.PodQOSBestEffort
	}
	return class
}

// AllContainers returns pod's init containers, then its containers.
func AllContainers(pod *v1.Pod) []*v1.Container {
	var cs []*v1.Container
	for i := range pod.Spec.InitContainers {
		cs = append(cs, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		cs = append(cs, &pod.Spec.Containers[i])
	}
	return cs
}

// requirementsQOS is the class of one set of requirements: cpu and memory each
// BestEffort (neither set), Guaranteed (request equals a non-zero limit) or
// Burstable; all alike gives that class, a mix Burstable.
func requirementsQOS(r *v1.ResourceRequirements) v1.PodQOSClass {
	if len(r.Requests) == 0 && len(r.Limits) == 0 {
		return v1.PodQOSBestEffort
	}
	var class v1.PodQOSClass
	for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
		req, lim := r.Requests[name], r.Limits[name]
		q := v1.PodQOSGuaranteed
		switch {
		case !req.Equal(lim):
			return v1.PodQOSBurstable
		case req.IsZero():
			q = v1.PodQOSBestEffort
		}
		if class == "" {
			class = q
		} else if class != q {
			return v1.PodQOSBurstable
		}
	}
	return class
}

// podLevelResourcesSet is component-helpers' IsPodLevelResourcesSet: spec.resources
// names cpu, memory or hugepages.
func podLevelResourcesSet(pod *v1.Pod) bool {
	r := pod.Spec.Resources
	return r != nil && (hasPodLevelResource(r.Requests) || hasPodLevelResource(r.Limits))
}

func hasPodLevelResource(rl v1.ResourceList) bool {
	for name := range rl {
		if name == v1.ResourceCPU || name == v1.ResourceMemory || strings.HasPrefix(string(name), v1.ResourceHugePagesPrefix) {
			return true
		}
	}
	return false
}

// oomScoreAdj is the kubelet's GetContainerOOMScoreAdjust for container c of pod
// on a machine with memoryCapacity bytes, which is only read for Burstable pods.
//
// The kubelet gives -997 to node-critical pods before looking at QoS:
// IsNodeCriticalPod is IsCriticalPod (true for every static pod) *and*
// priorityClassName system-node-critical. So a static pod is not -997 for being
// static: only one that names system-node-critical (as kubeadm's control plane
// manifests do) is; the others follow their QoS class like any pod.
func oomScoreAdj(pod *v1.Pod, c *v1.Container, memoryCapacity func() (int64, error)) (int, error) {
	if pod.Spec.PriorityClassName == systemNodeCritical {
		return guaranteedOOMScoreAdj, nil
	}
	switch QOSClass(pod) {
	case v1.PodQOSGuaranteed:
		return guaranteedOOMScoreAdj, nil
	case v1.PodQOSBestEffort:
		return besteffortOOMScoreAdj, nil
	}
	capacity, err := memoryCapacity()
	if err != nil {
		return 0, err
	}
	// Burstable: 1000 less the container's share of the machine's memory, in
	// thousandths, plus an equal share of the pod-level request the containers
	// leave unrequested (PodLevelResources).
	request := c.Resources.Requests.Memory().Value()
	if podLevelRequestsSet(pod) {
		request += remainingPodMemoryPerContainer(pod)
	}
	adj := 1000 - (1000*request)/capacity
	// A guaranteed container using all memory has an OOM score of 10: keep
	// burstable ones above it, and below best-effort ones.
	if adj < 1000+guaranteedOOMScoreAdj {
		return 1000 + guaranteedOOMScoreAdj, nil
	}
	if adj == besteffortOOMScoreAdj {
		return besteffortOOMScoreAdj - 1, nil
	}
	return int(adj), nil
}

func podLevelRequestsSet(pod *v1.Pod) bool {
	return pod.Spec.Resources != nil && hasPodLevelResource(pod.Spec.Resources.Requests)
}

// remainingPodMemoryPerContainer is the kubelet's remainingPodMemReqPerContainer:
// the pod-level memory request less the containers' effective request (the sum
// of the regular containers', or the largest init container's when larger),
// split evenly over all containers.
func remainingPodMemoryPerContainer(pod *v1.Pod) int64 {
	podRequest := pod.Spec.Resources.Requests.Memory()
	if podRequest.IsZero() {
		return 0
	}
	var sum int64
	for i := range pod.Spec.Containers {
		sum += pod.Spec.Containers[i].Resources.Requests.Memory().Value()
	}
	for i := range pod.Spec.InitContainers {
		sum = max(sum, pod.Spec.InitContainers[i].Resources.Requests.Memory().Value())
	}
	remaining := max(podRequest.Value()-sum, 0)
	return remaining / int64(len(pod.Spec.Containers)+len(pod.Spec.InitContainers))
}
