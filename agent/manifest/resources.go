package manifest

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// The kubelet's CFS constants (pkg/kubelet/cm/helpers_linux.go).
const (
	minShares      = 2
	maxShares      = 262144
	sharesPerCPU   = 1024
	milliCPUToCPU  = 1000
	quotaPeriod    = 100000 // µs
	minQuotaPeriod = 1000   // µs
)

// milliCPUToShares is the kubelet's MilliCPUToShares.
func milliCPUToShares(milliCPU int64) uint64 {
	if milliCPU == 0 {
		return minShares
	}
	shares := (milliCPU * sharesPerCPU) / milliCPUToCPU
	if shares < minShares {
		return minShares
	}
	if shares > maxShares {
		return maxShares
	}
	return uint64(shares)
}

// milliCPUToQuota is the kubelet's MilliCPUToQuota.
func milliCPUToQuota(milliCPU, period int64) int64 {
	if milliCPU == 0 {
		return 0
	}
	quota := (milliCPU * period) / milliCPUToCPU
	if quota < minQuotaPeriod {
		quota = minQuotaPeriod
	}
	return quota
}

// containerResources follows the kubelet's generateLinuxContainerResources:
// shares from the CPU request (defaulted from the limit; 2 without either), quota
// from the CPU limit over a 100ms period, memory limit in bytes.
func containerResources(c *v1.Container) podspec.Resources {
	var r podspec.Resources
	cpuRequest := c.Resources.Requests.Cpu()
	if cpuRequest.IsZero() {
		cpuRequest = c.Resources.Limits.Cpu()
	}
	r.CPUShares = milliCPUToShares(cpuRequest.MilliValue())
	if lim := c.Resources.Limits.Cpu(); !lim.IsZero() {
		r.CPUQuota = milliCPUToQuota(lim.MilliValue(), quotaPeriod)
		r.CPUPeriod = quotaPeriod
	}
	if lim := c.Resources.Limits.Memory(); !lim.IsZero() {
		r.MemoryLimit = lim.Value()
	}
	return r
}

// containerSecurity merges the pod's security context under the container's; the
// container wins where both set a value.
func containerSecurity(pod *v1.Pod, c *v1.Container, p Paths, h Host) (podspec.Security, error) {
	var s podspec.Security
	var nonRoot *bool
	if ps := pod.Spec.SecurityContext; ps != nil {
		s.RunAsUser, s.RunAsGroup, nonRoot = ps.RunAsUser, ps.RunAsGroup, ps.RunAsNonRoot
		// The kubelet's determineEffectiveSecurityContext: fsGroup first,
		// then the supplemental groups.
		if ps.FSGroup != nil {
			s.SupplementalGroups = append(s.SupplementalGroups, *ps.FSGroup)
		}
		s.SupplementalGroups = append(s.SupplementalGroups, ps.SupplementalGroups...)
	}
	if cs := c.SecurityContext; cs != nil {
		if cs.RunAsUser != nil {
			s.RunAsUser = cs.RunAsUser
		}
		if cs.RunAsGroup != nil {
			s.RunAsGroup = cs.RunAsGroup
		}
		if cs.RunAsNonRoot != nil {
			nonRoot = cs.RunAsNonRoot
		}
		s.Privileged = cs.Privileged != nil && *cs.Privileged
		s.ReadOnlyRootFilesystem = cs.ReadOnlyRootFilesystem != nil && *cs.ReadOnlyRootFilesystem
		s.NoNewPrivileges = cs.AllowPrivilegeEscalation != nil && !*cs.AllowPrivilegeEscalation
		if caps := cs.Capabilities; caps != nil {
			for _, c := range caps.Add {
				s.CapAdd = append(s.CapAdd, string(c))
			}
			for _, c := range caps.Drop {
				s.CapDrop = append(s.CapDrop, string(c))
			}
		}
	}
	s.RunAsNonRoot = nonRoot != nil && *nonRoot
	if cs := c.SecurityContext; cs != nil && cs.ProcMount != nil && *cs.ProcMount == v1.UnmaskedProcMount {
		s.Unmasked = true
	}
	var err error
	if s.Seccomp, err = seccomp(pod, c, p, h); err != nil {
		return s, err
	}
	if p.NoSeccomp != "" && needsSeccomp(s.Seccomp, s.Privileged) {
		return s, fmt.Errorf("seccompProfile %s: %s", s.Seccomp.Type, p.NoSeccomp)
	}
	if s.AppArmorProfile, err = appArmor(pod, c); err != nil {
		return s, err
	}
	s.SELinuxOptions = seLinuxOptions(pod, c)
	if _, err := podSysctls(pod, p); err != nil {
		return s, err
	}
	// The kubelet's verifyRunAsNonRoot, as far as the manifest alone can tell;
	// the runtime checks the image's user.
	if s.RunAsNonRoot && s.RunAsUser != nil && *s.RunAsUser == 0 {
		return s, fmt.Errorf("container's runAsUser breaks non-root policy")
	}
	return s, nil
}

// podResources follows the kubelet's ResourceConfigForPod for the pod's own
// cgroup (CFS quota enforced, no pod-level resources): CPU shares from the
// pod's CPU requests for every QoS class; for a Guaranteed pod also the CPU
// quota and memory limit from its limits; for a Burstable pod each of those
// only when every container declares that limit; a BestEffort pod gets the
// minimum shares. The pod's requests and limits are resourcehelper's
// PodRequests and PodLimits: the sum over containers and sidecars, or the
// largest init container's when that is more.
func podResources(pod *v1.Pod) podspec.Resources {
	var cpuReq, cpuLim, memLim int64
	cpuDeclared, memDeclared := true, true
	each := func(c *v1.Container, add func(sum *int64, v int64)) {
		req := c.Resources.Requests.Cpu()
		if req.IsZero() {
			req = c.Resources.Limits.Cpu()
		}
		add(&cpuReq, req.MilliValue())
		add(&cpuLim, c.Resources.Limits.Cpu().MilliValue())
		add(&memLim, c.Resources.Limits.Memory().Value())
		if c.Resources.Limits.Cpu().IsZero() {
			cpuDeclared = false
		}
		if c.Resources.Limits.Memory().IsZero() {
			memDeclared = false
		}
	}
	sum := func(s *int64, v int64) { *s += v }
	for i := range pod.Spec.Containers {
		each(&pod.Spec.Containers[i], sum)
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; isSidecar(c) {
			each(c, sum)
		}
	}
	for i := range pod.Spec.InitContainers {
		if c := &pod.Spec.InitContainers[i]; !isSidecar(c) {
			each(c, func(s *int64, v int64) { *s = max(*s, v) })
		}
	}
	var r podspec.Resources
	r.CPUShares = milliCPUToShares(cpuReq)
	qos := podQOS(pod)
	if qos == v1.PodQOSGuaranteed || (qos == v1.PodQOSBurstable && cpuDeclared) {
		r.CPUQuota = milliCPUToQuota(cpuLim, quotaPeriod)
		r.CPUPeriod = quotaPeriod
	}
	if qos == v1.PodQOSGuaranteed || (qos == v1.PodQOSBurstable && memDeclared) {
		r.MemoryLimit = memLim
	}
	return r
}

// MemoryVolumeSize is the size of a memory-backed volume of pod that has no
// sizeLimit of its own (a secret or projected volume): the kubelet's
// calculateEmptyDirMemorySize, the machine's memory or the pod's memory
// limit when it has one and it is less; 0 (the kernel's default) when
// neither is known.
func MemoryVolumeSize(pod *v1.Pod, h Host) int64 {
	size, _ := h.memoryCapacity()
	if lim := podResources(pod).MemoryLimit; lim > 0 && (size == 0 || lim < size) {
		size = lim
	}
	return size
}

func isSidecar(c *v1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == v1.ContainerRestartPolicyAlways
}

// podQOS is the kubelet's GetPodQOS over CPU and memory: Guaranteed when every
// container limits both and requests what it limits (an unset request is its
// limit), BestEffort when no container asks for or limits either, else Burstable.
func podQOS(pod *v1.Pod) v1.PodQOSClass {
	guaranteed, asks := true, false
	all := append(append([]v1.Container{}, pod.Spec.InitContainers...), pod.Spec.Containers...)
	for _, c := range all {
		for _, name := range []v1.ResourceName{v1.ResourceCPU, v1.ResourceMemory} {
			lim, hasLim := c.Resources.Limits[name]
			req, hasReq := c.Resources.Requests[name]
			if (hasLim && !lim.IsZero()) || (hasReq && !req.IsZero()) {
				asks = true
			}
			if !hasLim || lim.IsZero() {
				guaranteed = false
				continue
			}
			if hasReq && req.Cmp(lim) != 0 {
				guaranteed = false
			}
		}
	}
	switch {
	case !asks:
		return v1.PodQOSBestEffort
	case guaranteed:
		return v1.PodQOSGuaranteed
	default:
		return v1.PodQOSBurstable
	}
}
