package server

import (
	"context"
	"log/slog"
	"net/http"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// NodeReporter is implemented by an Agent that measures the node and its
// pods and tells the node's pressure conditions.
type NodeReporter interface {
	NodeName() string
	StatsSummary(ctx context.Context) (*podspec.Summary, error)
	PressureConditions() []v1.NodeCondition
}

// The /stats/summary document: a small subset of the kubelet's summary API
// (k8s.io/kubelet/pkg/apis/stats/v1alpha1), with its JSON names, so that
// a fuller one can grow from it.
type (
	StatsSummary struct {
		Node NodeStats  `json:"node"`
		Pods []PodStats `json:"pods"`
	}
	NodeStats struct {
		NodeName string        `json:"nodeName"`
		Memory   *MemoryStats  `json:"memory,omitempty"`
		Fs       *FsStats      `json:"fs,omitempty"`
		Runtime  *RuntimeStats `json:"runtime,omitempty"`
		Rlimit   *RlimitStats  `json:"rlimit,omitempty"`
		// Conditions are the node's pressure conditions (not in the
		// kubelet's summary, which leaves them to the Node object).
		Conditions []v1.NodeCondition `json:"conditions,omitempty"`
	}
	RuntimeStats struct {
		ImageFs *FsStats `json:"imageFs,omitempty"`
	}
	RlimitStats struct {
		MaxPID                *int64 `json:"maxpid,omitempty"`
		NumOfRunningProcesses *int64 `json:"curproc,omitempty"`
	}
	PodStats struct {
		PodRef       PodReference     `json:"podRef"`
		CPU          *CPUStats        `json:"cpu,omitempty"`
		Memory       *MemoryStats     `json:"memory,omitempty"`
		ProcessStats *ProcessStats    `json:"process_stats,omitempty"`
		Containers   []ContainerStats `json:"containers"`
	}
	PodReference struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
	}
	ContainerStats struct {
		Name   string       `json:"name"`
		CPU    *CPUStats    `json:"cpu,omitempty"`
		Memory *MemoryStats `json:"memory,omitempty"`
		Rootfs *FsStats     `json:"rootfs,omitempty"`
		Logs   *FsStats     `json:"logs,omitempty"`
	}
	CPUStats struct {
		UsageCoreNanoSeconds *uint64 `json:"usageCoreNanoSeconds,omitempty"`
	}
	MemoryStats struct {
		AvailableBytes  *uint64 `json:"availableBytes,omitempty"`
		UsageBytes      *uint64 `json:"usageBytes,omitempty"`
		WorkingSetBytes *uint64 `json:"workingSetBytes,omitempty"`
		RSSBytes        *uint64 `json:"rssBytes,omitempty"`
	}
	ProcessStats struct {
		ProcessCount *uint64 `json:"process_count,omitempty"`
	}
	FsStats struct {
		AvailableBytes *uint64 `json:"availableBytes,omitempty"`
		CapacityBytes  *uint64 `json:"capacityBytes,omitempty"`
		UsedBytes      *uint64 `json:"usedBytes,omitempty"`
		InodesFree     *uint64 `json:"inodesFree,omitempty"`
		Inodes         *uint64 `json:"inodes,omitempty"`
	}
)

func ptr[T any](v T) *T { return &v }

// toSummary converts the runtime's stats into the summary document.
func toSummary(node string, s *podspec.Summary, conds []v1.NodeCondition) StatsSummary {
	n := s.Node
	fs := func(f podspec.FsStats) *FsStats {
		return &FsStats{AvailableBytes: ptr(f.AvailableBytes), CapacityBytes: ptr(f.CapacityBytes),
			UsedBytes: ptr(f.CapacityBytes - min(f.CapacityBytes, f.AvailableBytes)), InodesFree: ptr(f.InodesFree), Inodes: ptr(f.Inodes)}
	}
	out := StatsSummary{Node: NodeStats{
		NodeName: node,
		Memory: &MemoryStats{AvailableBytes: ptr(n.MemoryCapacity - min(n.MemoryCapacity, n.MemoryWorkingSet)),
			UsageBytes: ptr(n.MemoryUsage), WorkingSetBytes: ptr(n.MemoryWorkingSet)},
		Fs:         fs(n.NodeFs),
		Runtime:    &RuntimeStats{ImageFs: fs(n.ImageFs)},
		Rlimit:     &RlimitStats{MaxPID: ptr(int64(n.MaxPID)), NumOfRunningProcesses: ptr(int64(n.NumPIDs))},
		Conditions: conds,
	}, Pods: []PodStats{}}
	usage := func(u podspec.Usage) (*CPUStats, *MemoryStats) {
		return &CPUStats{UsageCoreNanoSeconds: ptr(u.CPUUsageNanos)},
			&MemoryStats{UsageBytes: ptr(u.MemoryUsage), WorkingSetBytes: ptr(u.MemoryWorkingSet), RSSBytes: ptr(u.MemoryRSS)}
	}
	for _, p := range s.Pods {
		ps := PodStats{PodRef: PodReference{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
			ProcessStats: &ProcessStats{ProcessCount: ptr(p.Pids)}, Containers: []ContainerStats{}}
		ps.CPU, ps.Memory = usage(p.Usage)
		for _, c := range p.Containers {
			cs := ContainerStats{Name: c.Name, Rootfs: &FsStats{UsedBytes: ptr(c.RootfsBytes)}, Logs: &FsStats{UsedBytes: ptr(c.LogsBytes)}}
			cs.CPU, cs.Memory = usage(c.Usage)
			ps.Containers = append(ps.Containers, cs)
		}
		out.Pods = append(out.Pods, ps)
	}
	return out
}

// statsSummary serves /stats/summary: 404 when a does not measure.
func statsSummary(a Agent, logger *slog.Logger) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		nr, ok := a.(NodeReporter)
		if !ok {
			http.NotFound(w, r)
			return
		}
		s, err := nr.StatsSummary(r.Context())
		if s == nil {
			http.Error(w, "stats: "+err.Error(), http.StatusInternalServerError)
			return
		}
		if err != nil {
			logger.Debug("stats incomplete", "err", err)
		}
		writeJSON(w, logger, toSummary(nr.NodeName(), s, nr.PressureConditions()))
	}
}
