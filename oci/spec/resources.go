package spec

import (
	"fmt"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

const (
	defaultCPUPeriod = 100000 // µs, the kernel's and the kubelet's
	minCPUQuota      = 1000   // µs, the kubelet's MinQuotaPeriod; the kernel refuses less
)

// WithResources sets the container's cgroup limits: memory (swap equal to it, so
// no swap, as the kubelet with swap off), CPU shares, CPU quota per period (a quota
// under 1ms is raised to 1ms as the kubelet does), and the pids limit. Zero leaves a
// limit unset.
func WithResources(r podspec.Resources) SpecOpt {
	return func(s *specs.Spec) error {
		switch {
		case r.MemoryLimit < 0:
			return fmt.Errorf("resources.limits.memory %d: negative", r.MemoryLimit)
		case r.CPUQuota < 0:
			return fmt.Errorf("resources.limits.cpu: negative quota %d", r.CPUQuota)
		case r.PidsLimit < 0:
			return fmt.Errorf("pids limit %d: negative", r.PidsLimit)
		}
		res := s.Linux.Resources
		if res == nil {
			res = &specs.LinuxResources{}
			s.Linux.Resources = res
		}
		if r.MemoryLimit > 0 {
			res.Memory = &specs.LinuxMemory{Limit: ptr(r.MemoryLimit), Swap: ptr(r.MemoryLimit)}
		}
		if r.CPUShares > 0 || r.CPUQuota > 0 {
			res.CPU = &specs.LinuxCPU{}
		}
		if r.CPUShares > 0 {
			res.CPU.Shares = ptr(r.CPUShares)
		}
		if r.CPUQuota > 0 {
			period := r.CPUPeriod
			if period == 0 {
				period = defaultCPUPeriod
			}
			res.CPU.Quota = ptr(max(r.CPUQuota, minCPUQuota))
			res.CPU.Period = ptr(period)
		}
		if r.PidsLimit > 0 {
			res.Pids = &specs.LinuxPids{Limit: ptr(r.PidsLimit)}
		}
		return nil
	}
}

// WithCgroupsPath sets the container's cgroup path; "" leaves it to the runtime.
func WithCgroupsPath(p string) SpecOpt {
	return func(s *specs.Spec) error {
		s.Linux.CgroupsPath = p
		return nil
	}
}
