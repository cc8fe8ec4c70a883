package cri

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// stats is one measurement of the node, with its pods and containers by ID.
type stats struct {
	at   int64
	pods map[string]*podspec.PodStats
	ctrs map[string]*podspec.ContainerStats
}

func (r *runtimeService) stats(ctx context.Context) (*stats, error) {
	sum, err := r.cfg.Agent.StatsSummary(ctx)
	if sum == nil {
		return nil, status.Errorf(codes.Internal, "stats: %v", err)
	}
	s := &stats{at: sum.Node.Time.UnixNano(), pods: map[string]*podspec.PodStats{}, ctrs: map[string]*podspec.ContainerStats{}}
	if s.at <= 0 {
		s.at = time.Now().UnixNano()
	}
	for i := range sum.Pods {
		p := &sum.Pods[i]
		s.pods[p.UID] = p
		for j := range p.Containers {
			s.ctrs[p.Containers[j].ID] = &p.Containers[j]
		}
	}
	return s, nil
}

func (s *stats) container(ct *runtimeapi.Container) *runtimeapi.ContainerStats {
	out := &runtimeapi.ContainerStats{Attributes: &runtimeapi.ContainerAttributes{
		Id: ct.Id, Metadata: ct.Metadata, Labels: ct.Labels, Annotations: ct.Annotations}}
	if c := s.ctrs[ct.Id]; c != nil {
		out.Cpu, out.Memory = usage(s.at, c.Usage)
		out.WritableLayer = &runtimeapi.FilesystemUsage{Timestamp: s.at, UsedBytes: &runtimeapi.UInt64Value{Value: c.RootfsBytes}}
	}
	return out
}

func usage(at int64, u podspec.Usage) (*runtimeapi.CpuUsage, *runtimeapi.MemoryUsage) {
	return &runtimeapi.CpuUsage{Timestamp: at, UsageCoreNanoSeconds: &runtimeapi.UInt64Value{Value: u.CPUUsageNanos}},
		&runtimeapi.MemoryUsage{Timestamp: at, UsageBytes: &runtimeapi.UInt64Value{Value: u.MemoryUsage},
			WorkingSetBytes: &runtimeapi.UInt64Value{Value: u.MemoryWorkingSet}, RssBytes: &runtimeapi.UInt64Value{Value: u.MemoryRSS}}
}

func (r *runtimeService) ContainerStats(ctx context.Context, req *runtimeapi.ContainerStatsRequest) (*runtimeapi.ContainerStatsResponse, error) {
	v, err := r.view(ctx)
	if err != nil {
		return nil, err
	}
	c, err := v.findContainer(req.ContainerId)
	if err != nil {
		return nil, err
	}
	s, err := r.stats(ctx)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.ContainerStatsResponse{Stats: s.container(v.container(c))}, nil
}

func (r *runtimeService) ListContainerStats(ctx context.Context, req *runtimeapi.ListContainerStatsRequest) (*runtimeapi.ListContainerStatsResponse, error) {
	f := req.GetFilter()
	list := &runtimeapi.ListContainersRequest{}
	if f != nil {
		list.Filter = &runtimeapi.ContainerFilter{Id: f.Id, PodSandboxId: f.PodSandboxId, LabelSelector: f.LabelSelector}
	}
	cs, err := r.ListContainers(ctx, list)
	if err != nil {
		return nil, err
	}
	s, err := r.stats(ctx)
	if err != nil {
		return nil, err
	}
	out := &runtimeapi.ListContainerStatsResponse{Stats: []*runtimeapi.ContainerStats{}}
	for _, ct := range cs.Containers {
		// The kubelet's cadvisor-less stats are of running containers.
		if ct.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			out.Stats = append(out.Stats, s.container(ct))
		}
	}
	return out, nil
}

func (s *stats) sandbox(sb *runtimeapi.PodSandbox, ctrs []*runtimeapi.Container) *runtimeapi.PodSandboxStats {
	out := &runtimeapi.PodSandboxStats{
		Attributes: &runtimeapi.PodSandboxAttributes{Id: sb.Id, Metadata: sb.Metadata, Labels: sb.Labels, Annotations: sb.Annotations},
		Linux:      &runtimeapi.LinuxPodSandboxStats{},
	}
	p := s.pods[sb.Id]
	if p == nil {
		return out
	}
	out.Linux.Cpu, out.Linux.Memory = usage(s.at, p.Usage)
	out.Linux.Process = &runtimeapi.ProcessUsage{Timestamp: s.at, ProcessCount: &runtimeapi.UInt64Value{Value: p.Pids}}
	if len(p.Network) > 0 {
		n := &runtimeapi.NetworkUsage{Timestamp: s.at}
		for _, i := range p.Network {
			iu := &runtimeapi.NetworkInterfaceUsage{Name: i.Name, RxBytes: &runtimeapi.UInt64Value{Value: i.RxBytes},
				RxErrors: &runtimeapi.UInt64Value{Value: i.RxErrors}, TxBytes: &runtimeapi.UInt64Value{Value: i.TxBytes},
				TxErrors: &runtimeapi.UInt64Value{Value: i.TxErrors}}
			if i.Name == "eth0" {
				n.DefaultInterface = iu
			} else {
				n.Interfaces = append(n.Interfaces, iu)
			}
		}
		out.Linux.Network = n
	}
	for _, ct := range ctrs {
		if ct.PodSandboxId == sb.Id && ct.State == runtimeapi.ContainerState_CONTAINER_RUNNING {
			out.Linux.Containers = append(out.Linux.Containers, s.container(ct))
		}
	}
	return out
}

func (r *runtimeService) PodSandboxStats(ctx context.Context, req *runtimeapi.PodSandboxStatsRequest) (*runtimeapi.PodSandboxStatsResponse, error) {
	v, err := r.view(ctx)
	if err != nil {
		return nil, err
	}
	uid, err := v.findSandbox(req.PodSandboxId)
	if err != nil {
		return nil, err
	}
	s, err := r.stats(ctx)
	if err != nil {
		return nil, err
	}
	return &runtimeapi.PodSandboxStatsResponse{Stats: s.sandbox(v.sandbox(uid), v.ctrs())}, nil
}

func (r *runtimeService) ListPodSandboxStats(ctx context.Context, req *runtimeapi.ListPodSandboxStatsRequest) (*runtimeapi.ListPodSandboxStatsResponse, error) {
	list := &runtimeapi.ListPodSandboxRequest{}
	if f := req.GetFilter(); f != nil {
		list.Filter = &runtimeapi.PodSandboxFilter{Id: f.Id, LabelSelector: f.LabelSelector}
	}
	sbs, err := r.ListPodSandbox(ctx, list)
	if err != nil {
		return nil, err
	}
	v, err := r.view(ctx)
	if err != nil {
		return nil, err
	}
	s, err := r.stats(ctx)
	if err != nil {
		return nil, err
	}
	ctrs := v.ctrs()
	out := &runtimeapi.ListPodSandboxStatsResponse{Stats: []*runtimeapi.PodSandboxStats{}}
	for _, sb := range sbs.Items {
		out.Stats = append(out.Stats, s.sandbox(sb, ctrs))
	}
	return out, nil
}

func (v *view) ctrs() []*runtimeapi.Container {
	out := make([]*runtimeapi.Container, len(v.containers))
	for i, c := range v.containers {
		out[i] = v.container(c)
	}
	return out
}
