package agent

import (
	"fmt"
	"io"
	"os"
	"runtime"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/host"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// agent/manifest reads nothing of the host: what a conversion needs of it
// (manifest.Host, the resolver file) is read here, at each conversion, and
// passed in.

// machine is what conversions need of the machine: its CPUs, and its
// memory from host.Meminfo, read only by a conversion that needs it.
func machine() manifest.Host {
	return manifest.Host{CPUs: runtime.NumCPU(), Memory: machineMemory}
}

func machineMemory() (int64, error) {
	m, err := host.ReadMemory(host.Meminfo)
	if err != nil {
		return 0, err
	}
	return int64(m.Total), nil
}

// containerHost is what converting container c of pod needs of the host: the
// machine, and the Localhost seccomp profile c names, read from the profile
// root without leaving it.
func containerHost(pod *v1.Pod, c *v1.Container, p manifest.Paths) manifest.Host {
	h := machine()
	if name, ok := manifest.LocalhostSeccompProfile(pod, c); ok {
		h.SeccompProfile, h.SeccompErr = readBeneath(p.SeccompRoot(), name, manifest.MaxSeccompProfile)
	}
	return h
}

// podDNS is manifest.PodDNS with the node's resolver file resolvConf ("":
// a local resolver) read here; not for dnsPolicy None, which takes nothing
// from it.
func podDNS(pod *v1.Pod, resolvConf string) (*podspec.DNSConfig, []string, error) {
	if pod.Spec.DNSPolicy == v1.DNSNone {
		resolvConf = ""
	}
	return manifest.PodDNS(pod, readResolvConf(resolvConf))
}

// readResolvConf reads at most manifest.MaxResolvConfSize+1 bytes of the
// resolver file path.
func readResolvConf(path string) manifest.ResolvConf {
	rc := manifest.ResolvConf{Path: path}
	if path == "" {
		return rc
	}
	f, err := os.Open(path)
	if err != nil {
		rc.Err = fmt.Errorf("resolver configuration: %w", err)
		return rc
	}
	defer f.Close()
	if rc.Data, err = io.ReadAll(io.LimitReader(f, manifest.MaxResolvConfSize+1)); err != nil {
		rc.Err = fmt.Errorf("resolver configuration %s: %w", path, err)
	}
	return rc
}
