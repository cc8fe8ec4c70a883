package manifest

import (
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// MinimumGracePeriod is the kubelet's minimumGracePeriodInSeconds: a pod is
// given at least this long between SIGTERM and SIGKILL, whatever it asks for
// (even 0), and whatever grace an eviction or a probe overrides it with.
const MinimumGracePeriod = 2 * time.Second

// Paths are the host directories conversion needs.
type Paths struct {
	RootDir    string // volumes live under <RootDir>/pods/<uid>/volumes (agent/poddir)
	PodLogsDir string // default /var/log/pods
	// SeccompDefault (the configuration's seccompDefault) makes
	// RuntimeDefault the seccomp profile of containers that name none.
	SeccompDefault bool
	// NoSeccomp, when set, says why the runtime cannot apply a seccomp
	// profile (a binary built without seccomp): a container that would get
	// one is refused with it, instead of failing at every start.
	NoSeccomp string
	// SafeSysctls and AllowedUnsafeSysctls make the sysctl allowlist:
	// the kubelet's safe sysctls for this kernel (SafeSysctls) and the
	// configuration's allowedUnsafeSysctls (names or prefixes ending in '*').
	SafeSysctls          []string
	AllowedUnsafeSysctls []string
	// RecursiveReadOnly: the kernel has mount_setattr(2) with AT_RECURSIVE
	// (Linux 5.12), which recursiveReadOnly IfPossible then uses;
	// Enabled is used whatever it says, and fails where it cannot be.
	RecursiveReadOnly bool
}

// Host is what a conversion needs to know of the host, read by the caller
// for each conversion and passed in: this package never touches the host
// (tests/deps_test.go, purePackages). A read that failed comes as its error,
// which the conversion returns where it needs the value, so a container is
// refused for the same reason, in the same order of checks, as if it had
// read the host itself.
type Host struct {
	// CPUs is how many CPUs the daemon may run on (runtime.NumCPU): they
	// stand in for a missing CPU limit in a resourceFieldRef.
	CPUs int
	// Memory reads the machine's memory in bytes (MemTotal: the machine
	// memory capacity cAdvisor reports to the kubelet), called only by a
	// conversion that needs it: a Burstable container's oom_score_adj, and a
	// resourceFieldRef with no memory limit to stand for, where it reads 0
	// when unknown. nil: not known.
	Memory func() (int64, error)
	// SeccompProfile is the container's Localhost seccomp profile, the file
	// LocalhostSeccompProfile names read from Paths.SeccompRoot without
	// leaving it (at most MaxSeccompProfile bytes); SeccompErr is why it
	// could not be read.
	SeccompProfile []byte
	SeccompErr     error
	// Objects are the ConfigMaps and Secrets the pod's env, envFrom and
	// volumes name; nil: none.
	Objects Objects
}

// memoryCapacity is the machine's memory, or why it is not known.
func (h Host) memoryCapacity() (int64, error) {
	if h.Memory == nil {
		return 0, errors.New("machine memory: not read")
	}
	m, err := h.Memory()
	if err != nil {
		return 0, fmt.Errorf("machine memory: %w", err)
	}
	if m <= 0 {
		return 0, errors.New("machine memory: not read")
	}
	return m, nil
}

// LogDir is <PodLogsDir>/<namespace>_<name>_<uid>, the kubelet's pod log directory.
func (p Paths) LogDir(pod *v1.Pod) string {
	return filepath.Join(p.PodLogsDir, fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID))
}

// Sandbox returns the runtime's view of pod's sandbox. Its hostname is the pod
// name cut to 63 characters, as the kubelet does, or spec.hostname when set; a
// hostNetwork pod has the host's UTS namespace and no hostname of its own.
func Sandbox(pod *v1.Pod, p Paths) *podspec.Pod {
	s := &podspec.Pod{
		UID:         string(pod.UID),
		Namespace:   pod.Namespace,
		Name:        pod.Name,
		HostNetwork: pod.Spec.HostNetwork,
		HostIPC:     pod.Spec.HostIPC,
		HostPID:     pod.Spec.HostPID,
		LogDir:      p.LogDir(pod),
		Resources:   podResources(pod),
	}
	// An invalid sysctl fails each container's conversion, saying why.
	if sysctls, err := podSysctls(pod, p); err == nil {
		s.Sysctls = sysctls
	}
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		s.TerminationGracePeriod = max(time.Duration(*g)*time.Second, MinimumGracePeriod)
	}
	if !pod.Spec.HostNetwork {
		s.Hostname = podHostname(pod)
		s.PortMappings = portMappings(pod)
	}
	return s
}

// portMappings are the hostPorts of pod's containers, as the kubelet hands
// them to the runtime (kuberuntime's containerPortMappings): containers
// only, not init containers; a port without hostPort is not published.
func portMappings(pod *v1.Pod) []podspec.PortMapping {
	var out []podspec.PortMapping
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort <= 0 {
				continue
			}
			proto := p.Protocol
			if proto == "" {
				proto = v1.ProtocolTCP
			}
			out = append(out, podspec.PortMapping{
				HostPort: p.HostPort, ContainerPort: p.ContainerPort,
				Protocol: strings.ToLower(string(proto)), HostIP: p.HostIP,
			})
		}
	}
	return out
}

func podHostname(pod *v1.Pod) string {
	name := pod.Name
	if pod.Spec.Hostname != "" {
		name = pod.Spec.Hostname
	}
	if len(name) > 63 {
		name = strings.TrimRight(name[:63], "-.")
	}
	return name
}

// Container resolves container c of pod for the runtime: $(VAR) expansion of env,
// command and args; volumes to mounts; resources and security context; the hash;
// LogPath for the given attempt. It creates nothing on disk.
//
// status.podIP and status.hostIP in env come from pod.Status; set them before
// converting when they are known. What it needs of the host comes in h.
func Container(pod *v1.Pod, c *v1.Container, attempt int, p Paths, h Host) (*podspec.Container, error) {
	env, err := containerEnv(pod, c, p, h)
	if err != nil {
		// As the kubelet's message of CreateContainerConfigError, which
		// names neither: `configmap "x" not found`.
		return nil, err
	}
	mounts, err := containerMounts(pod, c, env, p)
	if err != nil {
		return nil, fmt.Errorf("container %s of pod %s: %w", c.Name, pod.Name, err)
	}
	security, err := containerSecurity(pod, c, p, h)
	if err != nil {
		return nil, fmt.Errorf("container %s of pod %s: %w", c.Name, pod.Name, err)
	}
	oomAdj, err := oomScoreAdj(pod, c, h.memoryCapacity)
	if err != nil {
		return nil, fmt.Errorf("container %s of pod %s: %w", c.Name, pod.Name, err)
	}
	hash, err := ContainerHash(pod, c)
	if err != nil {
		return nil, err
	}
	image, err := podspec.NormalizeImage(c.Image)
	if err != nil {
		return nil, fmt.Errorf("container %s of pod %s: %w", c.Name, pod.Name, err)
	}
	msgPath := ""
	if c.TerminationMessagePath != "" {
		// The kubelet's MakeAbsolutePath.
		msgPath = path.Clean("/" + c.TerminationMessagePath)
	}
	vars := make(map[string]string, len(env))
	for _, e := range env {
		if e.File == nil { // read when the container starts
			vars[e.Name] = e.Value
		}
	}
	mapping := mappingFuncFor(vars)
	out := &podspec.Container{
		Name:        c.Name,
		Image:       image,
		Command:     expandAll(c.Command, mapping),
		Args:        expandAll(c.Args, mapping),
		Env:         env,
		WorkingDir:  c.WorkingDir,
		Mounts:      mounts,
		Resources:   containerResources(c),
		Security:    security,
		OOMScoreAdj: &oomAdj,

		TerminationMessagePath:    msgPath,
		TerminationMessageFromLog: c.TerminationMessagePolicy == v1.TerminationMessageFallbackToLogsOnError,

		Attempt:     attempt,
		LogPath:     filepath.Join(p.LogDir(pod), c.Name, fmt.Sprintf("%d.log", attempt)),
		Annotations: stopAnnotations(c),
		Hash:        hash,
	}
	if l := c.Lifecycle; l != nil && l.StopSignal != nil {
		if out.StopSignal, err = podspec.ParseSignal(string(*l.StopSignal)); err != nil {
			return nil, fmt.Errorf("container %s of pod %s: lifecycle.stopSignal: %w", c.Name, pod.Name, err)
		}
	}
	return out, nil
}

// expandAll expands $(VAR) in each element, keeping nil as nil (nil Command runs
// the image's Entrypoint; an empty one does not).
func expandAll(in []string, mapping func(string) string) []string {
	if in == nil {
		return nil
	}
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, mapping)
	}
	return out
}
