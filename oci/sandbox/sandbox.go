// Package sandbox makes, keeps and removes pod sandboxes: what a pod's
// containers share. That is the pod's network, UTS and IPC namespaces (made
// on a thread of their own and bind-mounted, as `ip netns add` does), its
// /dev/shm, its hosts, hostname and resolv.conf, its cgroup, and its place on
// the pod network: CNI's ADD, CHECK and DEL, the default network's one
// masquerade rule, the hostPorts no two pods (nor the daemon's own
// listeners) may share. It also reaches into a pod's network namespace from
// the daemon: Dial for probes and hooks, InNetwork for network statistics.
//
// Package oci's Runtime is its one user: the sandbox knows nothing of
// containers, and oci tells it what it needs of them (where a pod's cgroup
// goes, whether a pod still has containers).
package sandbox

// On-disk layout under the run directory:
//
//	pods/<uid>/pod.json              Record
//	pods/<uid>/cgroup                the pod cgroup's path, until the cgroup is removed
//	pods/<uid>/{net,ipc,uts}         bind mounts of the sandbox namespaces
//	pods/<uid>/shm                   the pod's /dev/shm tmpfs (none with hostIPC)
//	pods/<uid>/{hosts,hostname,resolv.conf}
//	pods/<uid>/network.json          netRecord: the CNI attachment to DEL
const (
	// Dir holds one directory per sandbox, named by its pod's UID.
	Dir = "pods"
	// recordFile holds the sandbox's Record, written last: its presence
	// means the sandbox is complete.
	recordFile = "pod.json"
	// cgroupFile holds the path of the pod's cgroup, written before the
	// cgroup is made and kept until it is removed: a sandbox cut short
	// before its record, or whose removal failed after its record went,
	// still names its cgroup, whatever cgroupDriver or cgroupRoot the next
	// daemon has.
	cgroupFile = "cgroup"
)

// Record is what a sandbox remembers about its pod.
type Record struct {
	UID         string `json:"uid"`
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	Hostname    string `json:"hostname"`
	HostNetwork bool   `json:"hostNetwork,omitempty"`
	HostIPC     bool   `json:"hostIPC,omitempty"`
	CgroupsPath string `json:"cgroupsPath"`
	PidsLimit   int64  `json:"pidsLimit,omitempty"`
	// The pod cgroup's limits, as the kubelet sets them per QoS class.
	MemoryLimit int64  `json:"memoryLimit,omitempty"`
	CPUShares   uint64 `json:"cpuShares,omitempty"`
	CPUQuota    int64  `json:"cpuQuota,omitempty"`
	CPUPeriod   uint64 `json:"cpuPeriod,omitempty"`
	// The pod network: the pod's addresses on it, the network's name, the
	// CNI configuration it came from and its plugins' types, or why the pod
	// has none but its loopback.
	IPs            []string `json:"ips,omitempty"`
	Network        string   `json:"network,omitempty"`
	NetworkSource  string   `json:"networkSource,omitempty"`
	NetworkPlugins []string `json:"networkPlugins,omitempty"`
	NetworkMessage string   `json:"networkMessage,omitempty"`
}
