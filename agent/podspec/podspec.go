// Package podspec is the pod as the agent hands it to a container runtime: the one
// type that crosses from agent/ to oci/, and the one reading of an image
// reference both sides share. It imports only the standard library and
// go-containerregistry's reference parser, so oci/ never sees k8s.io/api and
// agent/ never sees libcontainer.
package podspec

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Errors a runtime returns where the agent branches on them.
var (
	// ErrImageNotPresent: the image is not in the local store (the pod waits,
	// ErrImageNeverPull-style, and is retried when the image arrives).
	ErrImageNotPresent = errors.New("image not present")
	// ErrNotExist: no container or sandbox with that ID.
	ErrNotExist = errors.New("does not exist")
	// ErrContainerConfig: the container cannot be made as asked over its image
	// (runAsNonRoot and a root image, an unknown user name, no command...): the
	// kubelet's CreateContainerConfigError.
	ErrContainerConfig = errors.New("invalid container configuration")
	// ErrStartFailed: the container was made but its process could not be
	// started (the command does not exist or is not executable, a mount or
	// a cgroup failed, the start timed out): the kubelet's RunContainerError.
	// With a status whose ID is set, the runtime keeps that container, exited
	// with exit code 128 and reason StartError, as containerd does, until it
	// is destroyed; otherwise nothing of it is left.
	ErrStartFailed = errors.New("container process not started")
	// ErrImageRefused: the image is in the store, but the image policy
	// refuses it now (a policy set or changed since it arrived), and nothing
	// of the container was made. The error's text gives the refusal from
	// "SignatureValidationFailed" on: the kubelet's waiting reason of a
	// pull its runtime's policy refused.
	ErrImageRefused = errors.New("image refused by the image policy")
)

// Pod is what a runtime needs to make a pod's sandbox: the namespaces and cgroup
// its containers share.
type Pod struct {
	UID       string
	Namespace string
	Name      string // full name, <name>-<node>
	Hostname  string // hostname inside the pod's UTS namespace

	HostNetwork bool
	HostIPC     bool
	HostPID     bool

	// LogDir is <podLogsDir>/<namespace>_<name>_<uid>.
	LogDir string

	// TerminationGracePeriod is the pod's terminationGracePeriodSeconds. The
	// runtime keeps it with each container (ContainerStatus), so that a pod
	// whose manifest is gone is still stopped with its own grace period.
	TerminationGracePeriod time.Duration
	// Sysctls are the pod's securityContext.sysctls, checked by the agent
	// (namespaced, allowed, not in a namespace shared with the host), set in
	// the pod's namespaces by each of its containers.
	Sysctls map[string]string

	// PidsLimit caps the number of processes of the whole pod (the kubelet's
	// podPidsLimit); 0 or less = no limit.
	PidsLimit int64
	// Resources are the pod cgroup's CPU shares, CPU quota and memory limit,
	// as the kubelet's ResourceConfigForPod sets them per QoS class (its
	// PidsLimit is unused: see PidsLimit above).
	Resources Resources

	// PortMappings are the hostPorts of the pod's containers, published on
	// the host through the pod network (CNI's portMappings capability).
	PortMappings []PortMapping
	// DNS is the pod's /etc/resolv.conf; nil: a copy of the host's.
	DNS *DNSConfig

	// FirstImage, when the sandbox is asked for, is the image (a
	// normalised reference) of the container that starts first after it,
	// if the caller knows it: a runtime may prepare that container while it
	// makes the sandbox. A hint only: the container may never come, or
	// with another image.
	FirstImage string
}

// DNSConfig is a resolv.conf: its nameserver lines, search line and
// options line.
type DNSConfig struct {
	Servers  []string
	Searches []string
	Options  []string
}

// PortMapping publishes ContainerPort of the pod at HostPort on the host:
// on HostIP only when set, else on every address. Protocol is "tcp", "udp"
// or "sctp", lower case as CNI's portMappings capability takes it.
type PortMapping struct {
	HostPort      int32
	ContainerPort int32
	Protocol      string
	HostIP        string
}

// SandboxStatus is what a runtime tells of a pod's sandbox.
type SandboxStatus struct {
	// IPs are the pod's addresses on its network, the IPv4 one first when
	// it has both; none with hostNetwork or without a pod network.
	IPs []netip.Addr
	// Network names the pod network the sandbox is attached to ("" for none).
	Network string
	// Source is the CNI configuration the network came from (a file of the
	// configuration directory, or "default", the built-in network), and
	// Plugins its plugins' types, in order; empty for a sandbox an earlier
	// version made.
	Source  string
	Plugins []string
	// Message says why a pod without hostNetwork has no network but its
	// loopback, when that is so.
	Message string
	// Chosen is the network a pod made now would get, when that is no
	// longer the sandbox's (another file of the configuration directory
	// sorts first, or the file names another network or plugins); nil
	// when it is the same. The sandbox keeps its network until it is made
	// again.
	Chosen *NetworkConf
}

// NetworkConf is a CNI network configuration: the network's name, where it
// came from (as SandboxStatus.Source) and its plugins' types; an empty Name
// is no pod network (Why says why).
type NetworkConf struct {
	Network string
	Source  string
	Plugins []string
	Why     string
}

// String is "NAME from SOURCE (plugins a, b)", or why there is none.
func (c NetworkConf) String() string {
	if c.Network == "" {
		return "no pod network: " + c.Why
	}
	return fmt.Sprintf("network %q from %s (plugins %s)", c.Network, c.Source, strings.Join(c.Plugins, ", "))
}

// Container is one container of a pod, fully resolved by the agent: command and args
// already $(VAR)-expanded, volumes already turned into mounts, log path chosen.
type Container struct {
	Name  string
	Image string // normalised reference, docker.io/library/busybox:latest
	// ImageID, when set, is the store's image (its ID) the agent made sure
	// of before the start, pulled and verified: the runtime starts that
	// one, not what Image names by then. "" for the runtime to look Image
	// up itself.
	ImageID string

	// Command and Args follow Kubernetes: Command nil runs the image's Entrypoint;
	// Args nil (with Command nil) runs the image's Cmd; Command set ignores both.
	Command []string
	Args    []string
	// Env is the pod's env, in order; the runtime puts it over the image's Env.
	Env        []EnvVar
	WorkingDir string // "" = the image's
	Mounts     []Mount
	Resources  Resources
	Security   Security
	// OOMScoreAdj is the container processes' oom_score_adj, set by the agent
	// from the pod's QoS class as the kubelet does; nil inherits the runtime's.
	OOMScoreAdj *int

	// StopSignal stops the container (lifecycle.stopSignal); 0 is the
	// image's StopSignal, else SIGTERM. SIGKILL follows after the grace
	// period, whatever it is.
	StopSignal syscall.Signal
	// TerminationMessagePath is where in the container its termination
	// message is written ("" = nowhere): the runtime binds a file of its own
	// there and, once the container exited, reads at most the last
	// MaxTerminationMessage bytes of it into ContainerStatus.Message.
	TerminationMessagePath string
	// TerminationMessageFromLog (FallbackToLogsOnError): a container that
	// failed and left no message gets the tail of its log instead, at most
	// MaxTerminationLogLines lines and MaxTerminationLogBytes bytes.
	TerminationMessageFromLog bool

	// Attempt is the container's restart count: 0 for the first run.
	Attempt int
	// LogPath is <LogDir>/<name>/<attempt>.log, CRI log format.
	LogPath string
	// Hash identifies the container's desired spec; adoption after a daemon
	// restart matches running containers by pod UID, name and Hash.
	Hash string
	// Annotations are kept with the container and given back in its
	// status, as CRI keeps a container's annotations: what the agent needs
	// to stop it once its pod's manifest is gone (its preStop hook).
	Annotations map[string]string

	// StopBefore and StopAfter are IDs of running containers this one
	// must stop before (those of the pods its pod starts after, and of a
	// higher priority) and after (those of the pods that start after its
	// pod, and of a lower priority) when the runtime's host stops them all
	// without the agent: systemd at power-off, under the systemd cgroup
	// driver. Unknown or gone IDs are harmless.
	StopBefore []string
	StopAfter  []string
}

type EnvVar struct {
	Name  string
	Value string
	// Sensitive: Value came from a Secret. The runtime never writes it to
	// a file, a log or an error (the name alone may be shown): the
	// container's process gets it, and so does a process exec'd in the
	// container, without it being at rest anywhere but in memory.
	Sensitive bool
	// File, when set, is where Value comes from, read when the container
	// starts (env[].valueFrom.fileKeyRef): Value is empty until then.
	File *EnvFile
}

// EnvFile is a variable's value in a file of key='value' lines an earlier
// container wrote into an emptyDir (the kubelet's EnvFiles).
type EnvFile struct {
	Dir      string // the emptyDir's host directory: trusted
	Path     string // inside Dir, as the pod gave it: hostile
	Key      string
	Optional bool // a missing key leaves the variable out
}

type Mount struct {
	Destination string
	Type        string // "bind" or "tmpfs"
	Source      string // host path for bind, "tmpfs" for tmpfs
	// SubPath, for a bind, is a relative path inside Source to bind instead of
	// Source itself. Source may be a directory a container can write (an
	// emptyDir, a hostPath), so the runtime resolves SubPath at start without
	// leaving Source, symlinks included, creates missing directories with
	// Source's mode, and binds what it opened by file descriptor. A SubPath
	// that leaves Source fails the start with ErrContainerConfig.
	SubPath  string
	ReadOnly bool
	// RecursiveReadOnly makes a read-only bind read-only all the way down,
	// submounts included (recursiveReadOnly Enabled, or IfPossible where the
	// kernel has mount_setattr).
	RecursiveReadOnly bool
	// Propagation is the bind's mountPropagation; "" is None.
	Propagation Propagation
	Options     []string // extra mount options, e.g. "size=64m" for tmpfs
}

// Propagation is a volumeMount's mountPropagation.
type Propagation string

const (
	PropagationNone Propagation = ""
	// PropagationHostToContainer: mounts made on the host under the
	// volume appear in the container (rslave); the source must be on a
	// shared or slave mount.
	PropagationHostToContainer Propagation = "HostToContainer"
	// PropagationBidirectional: also mounts made by the (privileged)
	// container appear on the host (rshared); the source must be on a
	// shared mount.
	PropagationBidirectional Propagation = "Bidirectional"
)

type Resources struct {
	MemoryLimit int64  // bytes; 0 = none
	CPUShares   uint64 // from the CPU request (kubelet MilliCPUToShares); 0 = default
	CPUQuota    int64  // µs per CPUPeriod from the CPU limit; 0 = none
	CPUPeriod   uint64 // µs; 0 = 100000
	PidsLimit   int64  // 0 = none
}

type Security struct {
	Privileged             bool
	CapAdd                 []string // "NET_ADMIN" or "CAP_NET_ADMIN"; "ALL" allowed
	CapDrop                []string
	RunAsUser              *int64 // nil = the image's user
	RunAsGroup             *int64
	SupplementalGroups     []int64
	ReadOnlyRootFilesystem bool
	NoNewPrivileges        bool // allowPrivilegeEscalation: false
	// RunAsNonRoot (pod's, or the container's over it) refuses to start the
	// container when it would run as uid 0, as the kubelet's verifyRunAsNonRoot.
	RunAsNonRoot bool
	// Seccomp is the container's seccomp profile (the container's
	// seccompProfile, else the pod's, else RuntimeDefault with the
	// configuration's seccompDefault, else Unconfined). A privileged
	// container runs without one, whatever it says, as containerd's.
	Seccomp Seccomp
	// Unmasked (procMount: Unmasked) leaves /proc without masked and
	// read-only paths.
	Unmasked bool
	// AppArmorProfile is appArmorProfile in the kubelet's older annotation
	// form: "" none asked for, "unconfined", "runtime/default", or
	// "localhost/<name>" for a profile loaded on the host.
	AppArmorProfile string
	// SELinuxOptions are seLinuxOptions as containerd hands them to its
	// label code: "user:u", "role:r", "type:t", "level:l", those set.
	SELinuxOptions []string
}

// SeccompType is a seccompProfile type, as Kubernetes names them.
type SeccompType string

const (
	SeccompUnconfined     SeccompType = "Unconfined"
	SeccompRuntimeDefault SeccompType = "RuntimeDefault"
	SeccompLocalhost      SeccompType = "Localhost"
)

// Seccomp is a resolved seccompProfile.
type Seccomp struct {
	Type SeccompType // "" is Unconfined
	// Name and Profile, for Localhost: the profile's name under the
	// seccomp profile root, and the profile itself (JSON, Docker's or the
	// OCI runtime spec's format), read by the agent when the container is
	// made, as the runtime reads it at CreateContainer.
	Name    string
	Profile []byte
}

// State of a container as the runtime sees it.
type State string

const (
	StateCreated State = "created" // made, process not started yet
	StateRunning State = "running"
	StateExited  State = "exited"
	StateUnknown State = "unknown"
)

// ContainerStatus is a container as the runtime knows it, running or exited. It is
// all the agent gets back after a daemon restart, so it carries the labels the agent
// needs to adopt it.
type ContainerStatus struct {
	ID           string
	PodUID       string
	PodName      string // full name
	PodNamespace string
	Name         string // container name
	Attempt      int
	Hash         string
	Image        string
	ImageID      string // sha256:… of the image config
	// ImageRef is what the pod status says as imageID: the repository digest
	// the image was pulled by, else ImageID (see image.Image.StatusRef).
	ImageRef string

	State      State
	Pid        int // the container's init process on the host, while running
	CreatedAt  time.Time
	StartedAt  time.Time
	FinishedAt time.Time
	ExitCode   int
	// Reason is set once exited: "Completed" (0), "Error", "OOMKilled".
	Reason  string
	Message string
	LogPath string
	// TerminationGracePeriod is the pod's, as it was when the container
	// started; 0 if unknown.
	TerminationGracePeriod time.Duration
	// StopSignal is the signal that stops the container: its own, else its
	// image's, else SIGTERM; 0 if unknown (SIGTERM).
	StopSignal syscall.Signal
	// Annotations are the container's, as it was started with them.
	Annotations map[string]string
}

// Bounds of a termination message, the kubelet's.
const (
	// MaxTerminationMessage is what is read of the end of a container's
	// termination message file (MaxContainerTerminationMessageLength).
	MaxTerminationMessage = 4 << 10
	// MaxTerminationLogLines and MaxTerminationLogBytes bound the tail of the
	// log that stands in for it (MaxContainerTerminationMessageLogLines and
	// MaxContainerTerminationMessageLogLength).
	MaxTerminationLogLines = 80
	MaxTerminationLogBytes = 2 << 10
	// MaxPodTerminationMessages is what the messages of all a pod's
	// containers may hold together, split evenly among its containers
	// (MaxPodTerminationMessageLogLength).
	MaxPodTerminationMessages = 12 << 10
)
