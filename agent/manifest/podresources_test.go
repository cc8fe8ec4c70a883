package manifest

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func ctr(req, lim map[v1.ResourceName]string) v1.Container {
	c := v1.Container{Name: "c"}
	for k, v := range req {
		if c.Resources.Requests == nil {
			c.Resources.Requests = v1.ResourceList{}
		}
		c.Resources.Requests[k] = resource.MustParse(v)
	}
	for k, v := range lim {
		if c.Resources.Limits == nil {
			c.Resources.Limits = v1.ResourceList{}
		}
		c.Resources.Limits[k] = resource.MustParse(v)
	}
	return c
}

type rl = map[v1.ResourceName]string

func TestPodResources(t *testing.T) {
	always := v1.ContainerRestartPolicyAlways
	sidecar := ctr(nil, rl{"cpu": "100m", "memory": "8Mi"})
	sidecar.RestartPolicy = &always
	for _, tc := range []struct {
		name string
		init []v1.Container
		ctrs []v1.Container
		qos  v1.PodQOSClass
		want podspec.Resources
	}{
		{"best effort: minimum shares only", nil, []v1.Container{ctr(nil, nil)}, v1.PodQOSBestEffort,
			podspec.Resources{CPUShares: 2}},
		{"guaranteed: limits summed", nil, []v1.Container{
			ctr(nil, rl{"cpu": "100m", "memory": "32Mi"}), ctr(nil, rl{"cpu": "250m", "memory": "16Mi"}),
		}, v1.PodQOSGuaranteed, podspec.Resources{CPUShares: 358, CPUQuota: 35000, CPUPeriod: 100000, MemoryLimit: 48 << 20}},
		{"burstable: memory limit everywhere, cpu not", nil, []v1.Container{
			ctr(rl{"cpu": "100m"}, rl{"memory": "32Mi"}), ctr(rl{"cpu": "50m"}, rl{"memory": "16Mi"}),
		}, v1.PodQOSBurstable, podspec.Resources{CPUShares: 153, MemoryLimit: 48 << 20}},
		{"burstable: one container without limits, no pod limits", nil, []v1.Container{
			ctr(nil, rl{"cpu": "100m", "memory": "32Mi"}), ctr(rl{"memory": "1Mi"}, nil),
		}, v1.PodQOSBurstable, podspec.Resources{CPUShares: 102}},
		{"burstable: requests below limits", nil, []v1.Container{
			ctr(rl{"cpu": "50m", "memory": "8Mi"}, rl{"cpu": "100m", "memory": "32Mi"}),
		}, v1.PodQOSBurstable, podspec.Resources{CPUShares: 51, CPUQuota: 10000, CPUPeriod: 100000, MemoryLimit: 32 << 20}},
		{"a larger init container wins", []v1.Container{ctr(nil, rl{"cpu": "1", "memory": "64Mi"})}, []v1.Container{
			ctr(nil, rl{"cpu": "100m", "memory": "32Mi"}),
		}, v1.PodQOSGuaranteed, podspec.Resources{CPUShares: 1024, CPUQuota: 100000, CPUPeriod: 100000, MemoryLimit: 64 << 20}},
		{"a sidecar adds to the containers", []v1.Container{sidecar}, []v1.Container{
			ctr(nil, rl{"cpu": "100m", "memory": "32Mi"}),
		}, v1.PodQOSGuaranteed, podspec.Resources{CPUShares: 204, CPUQuota: 20000, CPUPeriod: 100000, MemoryLimit: 40 << 20}},
	} {
		pod := &v1.Pod{Spec: v1.PodSpec{InitContainers: tc.init, Containers: tc.ctrs}}
		if got := podQOS(pod); got != tc.qos {
			t.Errorf("%s: QoS %s, want %s", tc.name, got, tc.qos)
		}
		if got := podResources(pod); got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.name, got, tc.want)
		}
	}
}
