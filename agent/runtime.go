package agent

import (
	"context"
	"net"
	"syscall"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Runtime is what the agent needs from a container runtime. oci.Runtime implements
// it; package daemon asserts that. Every method is safe for concurrent use, and all
// of them work for containers started by an earlier daemon process (adoption).
type Runtime interface {
	// CreateSandbox makes the namespaces and cgroup a pod's containers share.
	// It is idempotent: calling it for an existing sandbox is a no-op.
	CreateSandbox(ctx context.Context, pod *podspec.Pod) error
	// RemoveSandbox removes what CreateSandbox made: mounts of namespaces, the
	// pod cgroup, state. The pod's containers must be destroyed first.
	// Removing a sandbox that does not exist is not an error.
	RemoveSandbox(ctx context.Context, podUID string) error
	// ListSandboxes returns the pod UIDs that have a sandbox.
	ListSandboxes(ctx context.Context) ([]string, error)
	// SandboxStatus returns a sandbox's addresses on the pod network, or why
	// it has none. The first call for an adopted sandbox checks its network.
	SandboxStatus(ctx context.Context, podUID string) (podspec.SandboxStatus, error)

	// StartContainer creates and starts one container of pod and returns once
	// its process has been told to exec. An image missing from the store is
	// ErrImageNotPresent.
	StartContainer(ctx context.Context, pod *podspec.Pod, c *podspec.Container) (podspec.ContainerStatus, error)
	// Signal sends sig to the container's init process.
	Signal(ctx context.Context, id string, sig syscall.Signal) error
	// Wait blocks until the container has exited and its exit is recorded, or ctx
	// ends, and returns its status. It works for adopted containers too.
	Wait(ctx context.Context, id string) (podspec.ContainerStatus, error)
	// Destroy removes an exited container: cgroup, rootfs mounts, overlay dirs,
	// state. It refuses a running one. Destroying what does not exist is not an error.
	Destroy(ctx context.Context, id string) error
	// List returns every container the runtime knows, running or exited.
	List(ctx context.Context) ([]podspec.ContainerStatus, error)
	// Dial connects to addr from inside the pod's network namespace (the
	// host's for hostNetwork): how probes reach a container.
	Dial(ctx context.Context, podUID, network, addr string) (net.Conn, error)

	// Exec runs a process in running container id, with the container's
	// namespaces, cgroup, user, environment and security settings, and
	// returns its exit code. It never outlives ctx or spec.Timeout (the process
	// is killed). An unknown container is ErrNotExist, one without a running
	// process ErrNotRunning; a command that cannot be started is
	// ErrCommandNotFound or ErrCommandNotExecutable.
	Exec(ctx context.Context, id string, spec podspec.ExecSpec) (int, error)

	// Debug runs c in pod's sandbox as an ephemeral container, in the PID
	// namespace of running container target if not empty, with spec's
	// command and streams, until the command exits or ctx ends, and removes
	// it: it returns the command's exit code once nothing of the container
	// is left. started, if not nil, is told the container's ID once its
	// process runs. A daemon that dies meanwhile leaves it to the next
	// one's recovery.
	Debug(ctx context.Context, pod *podspec.Pod, c *podspec.Container, target string, spec podspec.ExecSpec, started func(id string)) (int, error)

	// Stats measures the node (memory, processes, the filesystems of the root
	// dir and its images) and each pod with a sandbox and its containers.
	// What it could measure is returned with the error of what it could not.
	Stats(ctx context.Context) (*podspec.Summary, error)

	// NodeStats is Stats' node part alone: all the eviction signals need
	// until a threshold is met and pods are to be ranked.
	NodeStats(ctx context.Context) (podspec.NodeStats, error)
}
