// Package spec turns a podspec container into an OCI runtime spec, with
// functional options composed in one Generate, the way containerd's pkg/oci and its
// CRI plugin build a Kubernetes container's spec.
package spec

import (
	"fmt"
	"os"
	"strconv"

	imagespec "github.com/opencontainers/image-spec/specs-go/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Sandbox is what a container joins: the pod's shared namespaces and files.
type Sandbox struct {
	NetNS string // path of the pod's network namespace file; "" with HostNetwork
	IPCNS string // path of the pod's IPC namespace file; "" with HostIPC
	UTSNS string // path of the pod's UTS namespace file; "" with HostNetwork

	CgroupsPath string // cgroupfs path of the container, e.g. /staticpodd/pod<uid>/<id>

	HostsFile      string // bind-mounted at /etc/hosts when not ""
	HostnameFile   string // bind-mounted at /etc/hostname when not ""
	ResolvConfFile string // bind-mounted at /etc/resolv.conf when not ""
	// ShmPath is bind-mounted at /dev/shm when not "": the pod's own tmpfs,
	// which its containers share, or the host's /dev/shm with hostIPC.
	ShmPath string
}

// SpecOpt changes a spec; Generate applies them in order, so a later option wins.
type SpecOpt func(*specs.Spec) error

// Annotations Generate sets, with the kubelet's label names, so a container can be
// told apart from its spec alone.
const (
	AnnotationPodName      = "io.kubernetes.pod.name"
	AnnotationPodNamespace = "io.kubernetes.pod.namespace"
	AnnotationPodUID       = "io.kubernetes.pod.uid"
	AnnotationContainer    = "io.kubernetes.container.name"
	AnnotationHash         = "io.kubernetes.container.hash"
	AnnotationRestartCount = "io.kubernetes.container.restartCount"
)

// maxNofile is the RLIMIT_NOFILE containers ask for (containerd's and the kubelet's
// usual 1048576), lowered to what the calling process may hand out.
const maxNofile = 1048576

// Generate returns the OCI runtime spec for container c of pod, over an image with
// config img unpacked at rootfs.
func Generate(pod *podspec.Pod, c *podspec.Container, img imagespec.ImageConfig, rootfs string, sb Sandbox) (*specs.Spec, error) {
	if pod == nil || c == nil {
		return nil, fmt.Errorf("generate spec: pod and container are required")
	}
	s, err := generate(pod, c, img, rootfs, sb)
	if err != nil {
		return nil, fmt.Errorf("generate spec for container %q of pod %s: %w", c.Name, pod.Name, err)
	}
	return s, nil
}

func generate(pod *podspec.Pod, c *podspec.Container, img imagespec.ImageConfig, rootfs string, sb Sandbox) (*specs.Spec, error) {
	args, err := processArgs(c, img)
	if err != nil {
		return nil, err
	}
	hostname := pod.Hostname
	envHostname := hostname
	if pod.HostNetwork {
		hostname = "" // keep the host's: there is no UTS namespace to name
		if h, err := os.Hostname(); err == nil {
			envHostname = h
		}
	}
	sec := c.Security

	opts := []SpecOpt{
		WithRoot(rootfs, sec.ReadOnlyRootFilesystem),
		WithProcessArgs(args...),
		WithEnv(img.Env),
		WithEnv(envStrings(c.Env)),
		WithDefaultEnv("HOSTNAME="+envHostname, "PATH="+DefaultPath),
		WithCwd(c.WorkingDir, img.WorkingDir),
		WithHostname(hostname),
		WithNamespaces(pod, sb),
		WithSandboxFiles(sb, sec.ReadOnlyRootFilesystem),
		WithSandboxShm(sb.ShmPath),
		WithMounts(c.Mounts),
		WithMountPropagation(c.Mounts, hostPropagation),
	}
	if sec.Privileged {
		opts = append(opts, WithPrivileged())
	} else {
		opts = append(opts, WithCapabilityChanges(sec.CapAdd, sec.CapDrop))
	}
	if sec.Unmasked {
		opts = append(opts, WithUnmaskedProc())
	}
	if sec.RunAsNonRoot {
		opts = append(opts, WithRunAsNonRoot(sec.RunAsUser, img.User))
	}
	opts = append(opts,
		WithUser(rootfs, sec.RunAsUser, sec.RunAsGroup, img.User, sec.SupplementalGroups),
		WithOOMScoreAdj(c.OOMScoreAdj),
		WithNoNewPrivileges(sec.NoNewPrivileges),
		WithSysctls(pod.Sysctls),
		WithAppArmor(sec.AppArmorProfile),
		WithSELinux(sec.SELinuxOptions),
		// After the capabilities: the default profile's rules depend on them.
		WithSeccomp(sec.Seccomp, sec.Privileged),
		WithNofileLimit(maxNofile),
		WithResources(c.Resources),
		WithCgroupsPath(sb.CgroupsPath),
		WithAnnotations(map[string]string{
			AnnotationPodName:      pod.Name,
			AnnotationPodNamespace: pod.Namespace,
			AnnotationPodUID:       pod.UID,
			AnnotationContainer:    c.Name,
			AnnotationHash:         c.Hash,
			AnnotationRestartCount: strconv.Itoa(c.Attempt),
		}),
	)

	s := Default()
	if err := apply(s, opts...); err != nil {
		return nil, err
	}
	return s, nil
}

func apply(s *specs.Spec, opts ...SpecOpt) error {
	for _, o := range opts {
		if err := o(s); err != nil {
			return err
		}
	}
	return nil
}

// WithRoot sets the root filesystem path and whether it is read-only
// (securityContext.readOnlyRootFilesystem).
func WithRoot(path string, readonly bool) SpecOpt {
	return func(s *specs.Spec) error {
		if path == "" || path[0] != '/' {
			return fmt.Errorf("rootfs %q: must be an absolute path", path)
		}
		s.Root = &specs.Root{Path: path, Readonly: readonly}
		return nil
	}
}

// WithHostname sets the container's hostname; "" keeps the one of the UTS
// namespace the container is in (the host's with hostNetwork).
func WithHostname(name string) SpecOpt {
	return func(s *specs.Spec) error {
		s.Hostname = name
		return nil
	}
}

// WithAnnotations adds annotations, replacing those with the same keys. Empty
// values are left out.
func WithAnnotations(a map[string]string) SpecOpt {
	return func(s *specs.Spec) error {
		for k, v := range a {
			if v == "" {
				continue
			}
			if s.Annotations == nil {
				s.Annotations = map[string]string{}
			}
			s.Annotations[k] = v
		}
		return nil
	}
}
