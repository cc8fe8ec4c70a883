package spec

import (
	"fmt"
	"os"
	"path"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// WithNamespaces sets the container's namespaces: its own mount, pid (none with
// hostPID) and, where the kernel has them, cgroup namespaces; the pod's network,
// IPC and UTS namespaces at the sandbox's paths, or the host's with hostNetwork
// (network and UTS) and hostIPC. A pod namespace without a path is a new one.
func WithNamespaces(pod *podspec.Pod, sb Sandbox) SpecOpt {
	return func(s *specs.Spec) error {
		ns := []specs.LinuxNamespace{{Type: specs.MountNamespace}}
		if !pod.HostPID {
			ns = append(ns, specs.LinuxNamespace{Type: specs.PIDNamespace})
		}
		if HostHasCgroupNamespace() {
			ns = append(ns, specs.LinuxNamespace{Type: specs.CgroupNamespace})
		}
		for _, p := range []struct {
			typ   specs.LinuxNamespaceType
			host  bool
			path  string
			field string
		}{
			{specs.NetworkNamespace, pod.HostNetwork, sb.NetNS, "NetNS"},
			{specs.IPCNamespace, pod.HostIPC, sb.IPCNS, "IPCNS"},
			{specs.UTSNamespace, pod.HostNetwork, sb.UTSNS, "UTSNS"},
		} {
			if p.host {
				continue
			}
			if p.path != "" && !path.IsAbs(p.path) {
				return fmt.Errorf("sandbox %s %q: must be an absolute path", p.field, p.path)
			}
			ns = append(ns, specs.LinuxNamespace{Type: p.typ, Path: p.path})
		}
		s.Linux.Namespaces = ns
		return nil
	}
}

// HostHasCgroupNamespace reports whether the kernel supports cgroup namespaces.
func HostHasCgroupNamespace() bool {
	_, err := os.Stat("/proc/self/ns/cgroup")
	return err == nil
}
