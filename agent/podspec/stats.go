package podspec

import "time"

// Summary is what a runtime measures of the node and its pods, named after the
// kubelet's summary API (k8s.io/kubelet/pkg/apis/stats/v1alpha1).
type Summary struct {
	Node NodeStats
	Pods []PodStats
}

// NodeStats is the node as eviction sees it: memory and processes of the
// node's cgroup, and the filesystems the runtime writes to.
type NodeStats struct {
	Time time.Time
	// Memory: capacity is the node's memory (or, for tests, the memory limit
	// of the cgroup that stands for the node); working set as the kubelet
	// computes it, usage − inactive_file.
	MemoryCapacity   uint64
	MemoryWorkingSet uint64
	MemoryUsage      uint64
	// CPUUsageNanos is the CPU time of every process of the node (the root
	// cgroup's, or NodeCgroup's), as cadvisor measures the node.
	CPUUsageNanos uint64
	// Pods is the memory of the parent cgroup of every pod: what
	// allocatableMemory.available is measured against.
	PodsMemoryWorkingSet uint64
	// Processes: the most there may be and how many there are
	// (the kubelet's RlimitStats).
	MaxPID  uint64
	NumPIDs uint64
	// NodeFs is the filesystem of the root dir, ImageFs that of its images.
	NodeFs, ImageFs FsStats
	// Network is the node's interfaces, as cadvisor lists them (no lo,
	// veth or docker ones).
	Network []InterfaceStats
}

// InterfaceStats is one network interface's counters, from /proc/net/dev
// in the namespace it belongs to.
type InterfaceStats struct {
	Name                                    string
	RxBytes, RxPackets, RxErrors, RxDropped uint64
	TxBytes, TxPackets, TxErrors, TxDropped uint64
}

// FsStats is one filesystem's space and inodes, from statfs.
type FsStats struct {
	CapacityBytes, AvailableBytes uint64
	Inodes, InodesFree            uint64
}

// PodStats is one pod's usage: its cgroup and its containers.
type PodStats struct {
	UID       string
	Namespace string
	Name      string
	Usage
	// Network is the interfaces of the pod's network namespace (the
	// node's, with hostNetwork), as cadvisor lists them.
	Network    []InterfaceStats
	Containers []ContainerStats
}

// ContainerStats is one container's usage.
type ContainerStats struct {
	ID   string
	Name string
	Usage
	// RootfsBytes is the size of its writable layer, LogsBytes of its log
	// files (rotated ones included).
	RootfsBytes uint64
	LogsBytes   uint64
}

// Usage is what a cgroup measures.
type Usage struct {
	CPUUsageNanos    uint64 // cumulative CPU time
	MemoryUsage      uint64
	MemoryWorkingSet uint64 // usage − inactive_file
	MemoryRSS        uint64 // anonymous and swap cache memory
	MemoryCache      uint64 // page cache: v2's file, v1's total_cache
	Pids             uint64
	// CFS bandwidth control (cpu.stat), counted only under a CPU quota:
	// periods elapsed, periods throttled, and time throttled.
	CPUPeriods, CPUThrottledPeriods, CPUThrottledNanos uint64
}
