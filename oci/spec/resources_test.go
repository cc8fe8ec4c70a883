package spec

import (
	"reflect"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestWithResources(t *testing.T) {
	mi := int64(64 << 20)
	tests := []struct {
		name       string
		r          podspec.Resources
		wantMemory *specs.LinuxMemory
		wantCPU    *specs.LinuxCPU
		wantPids   *specs.LinuxPids
		wantErr    string
	}{
		{name: "none"},
		{name: "memory, no swap", r: podspec.Resources{MemoryLimit: mi}, wantMemory: &specs.LinuxMemory{Limit: &mi, Swap: &mi}},
		{name: "shares only", r: podspec.Resources{CPUShares: 512}, wantCPU: &specs.LinuxCPU{Shares: ptr[uint64](512)}},
		{name: "quota, default period", r: podspec.Resources{CPUQuota: 50000}, wantCPU: &specs.LinuxCPU{Quota: ptr[int64](50000), Period: ptr[uint64](100000)}},
		{name: "quota and period", r: podspec.Resources{CPUShares: 2, CPUQuota: 20000, CPUPeriod: 50000}, wantCPU: &specs.LinuxCPU{Shares: ptr[uint64](2), Quota: ptr[int64](20000), Period: ptr[uint64](50000)}},
		{name: "tiny quota raised to 1ms", r: podspec.Resources{CPUQuota: 10}, wantCPU: &specs.LinuxCPU{Quota: ptr[int64](1000), Period: ptr[uint64](100000)}},
		{name: "pids", r: podspec.Resources{PidsLimit: 100}, wantPids: &specs.LinuxPids{Limit: ptr[int64](100)}},
		{name: "negative memory", r: podspec.Resources{MemoryLimit: -1}, wantErr: "resources.limits.memory"},
		{name: "negative quota", r: podspec.Resources{CPUQuota: -1}, wantErr: "resources.limits.cpu"},
		{name: "negative pids", r: podspec.Resources{PidsLimit: -1}, wantErr: "pids"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Default()
			devices := s.Linux.Resources.Devices
			err := WithResources(tt.r)(s)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr != "" {
				return
			}
			res := s.Linux.Resources
			if !reflect.DeepEqual(res.Memory, tt.wantMemory) {
				t.Errorf("memory = %+v, want %+v", res.Memory, tt.wantMemory)
			}
			if !reflect.DeepEqual(res.CPU, tt.wantCPU) {
				t.Errorf("cpu = %+v, want %+v", res.CPU, tt.wantCPU)
			}
			if !reflect.DeepEqual(res.Pids, tt.wantPids) {
				t.Errorf("pids = %+v, want %+v", res.Pids, tt.wantPids)
			}
			if !reflect.DeepEqual(res.Devices, devices) {
				t.Errorf("device rules changed: %+v", res.Devices)
			}
		})
	}
}

func TestWithCgroupsPath(t *testing.T) {
	for _, p := range []string{"", "/staticpodd/podx/c1"} {
		s := Default()
		if err := WithCgroupsPath(p)(s); err != nil {
			t.Fatal(err)
		}
		if s.Linux.CgroupsPath != p {
			t.Errorf("cgroupsPath = %q, want %q", s.Linux.CgroupsPath, p)
		}
	}
}
