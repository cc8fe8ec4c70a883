package server

import (
	"context"
	"log/slog"
	"net/http"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// NodeReporter is implemented by an Agent that measures the node and its
// pods and tells the node's pressure conditions.
type NodeReporter interface {
	NodeName() string
	StatsSummary(ctx context.Context) (*podspec.Summary, error)
	PressureConditions() []v1.NodeCondition
}

// StatsSummary is the /stats/summary document: the kubelet's summary API
// (k8s.io/kubelet/pkg/apis/stats/v1alpha1), the fields staticpodd measures,
// and the node's pressure conditions beside them.
type StatsSummary struct {
	Node NodeStats           `json:"node"`
	Pods []statsapi.PodStats `json:"pods"`
}

// NodeStats is the kubelet's, with the node's pressure conditions, which the
// kubelet's summary leaves to the Node object.
type NodeStats struct {
	statsapi.NodeStats
	Conditions []v1.NodeCondition `json:"conditions,omitempty"`
}

func ptr[T any](v T) *T { return &v }

// toSummary converts the runtime's stats into the summary document.
func toSummary(node string, s *podspec.Summary, conds []v1.NodeCondition) StatsSummary {
	n := s.Node
	at := metav1.NewTime(n.Time)
	fs := func(f podspec.FsStats) *statsapi.FsStats {
		return &statsapi.FsStats{Time: at, AvailableBytes: ptr(f.AvailableBytes), CapacityBytes: ptr(f.CapacityBytes),
			UsedBytes: ptr(f.CapacityBytes - min(f.CapacityBytes, f.AvailableBytes)), InodesFree: ptr(f.InodesFree), Inodes: ptr(f.Inodes)}
	}
	out := StatsSummary{Node: NodeStats{NodeStats: statsapi.NodeStats{
		NodeName: node,
		CPU:      &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: ptr(n.CPUUsageNanos)},
		Memory: &statsapi.MemoryStats{Time: at, AvailableBytes: ptr(n.MemoryCapacity - min(n.MemoryCapacity, n.MemoryWorkingSet)),
			UsageBytes: ptr(n.MemoryUsage), WorkingSetBytes: ptr(n.MemoryWorkingSet)},
		Fs:      fs(n.NodeFs),
		Runtime: &statsapi.RuntimeStats{ImageFs: fs(n.ImageFs)},
		Rlimit:  &statsapi.RlimitStats{Time: at, MaxPID: ptr(int64(n.MaxPID)), NumOfRunningProcesses: ptr(int64(n.NumPIDs))},
	}, Conditions: conds}, Pods: []statsapi.PodStats{}}
	usage := func(u podspec.Usage) (*statsapi.CPUStats, *statsapi.MemoryStats) {
		return &statsapi.CPUStats{Time: at, UsageCoreNanoSeconds: ptr(u.CPUUsageNanos)},
			&statsapi.MemoryStats{Time: at, UsageBytes: ptr(u.MemoryUsage), WorkingSetBytes: ptr(u.MemoryWorkingSet), RSSBytes: ptr(u.MemoryRSS)}
	}
	for _, p := range s.Pods {
		ps := statsapi.PodStats{PodRef: statsapi.PodReference{Name: p.Name, Namespace: p.Namespace, UID: p.UID},
			ProcessStats: &statsapi.ProcessStats{ProcessCount: ptr(p.Pids)}, Containers: []statsapi.ContainerStats{}}
		ps.CPU, ps.Memory = usage(p.Usage)
		for _, c := range p.Containers {
			cs := statsapi.ContainerStats{Name: c.Name,
				Rootfs: &statsapi.FsStats{Time: at, UsedBytes: ptr(c.RootfsBytes)}, Logs: &statsapi.FsStats{Time: at, UsedBytes: ptr(c.LogsBytes)}}
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
