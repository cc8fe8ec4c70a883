package spec

import (
	"reflect"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestWithNamespaces(t *testing.T) {
	sb := Sandbox{NetNS: "/run/netns/p", IPCNS: "/run/ipcns/p", UTSNS: "/run/utsns/p"}
	own := []specs.LinuxNamespace{{Type: specs.MountNamespace}, {Type: specs.PIDNamespace}}
	if HostHasCgroupNamespace() {
		own = append(own, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	}
	ownNoPID := []specs.LinuxNamespace{{Type: specs.MountNamespace}}
	if HostHasCgroupNamespace() {
		ownNoPID = append(ownNoPID, specs.LinuxNamespace{Type: specs.CgroupNamespace})
	}
	net := specs.LinuxNamespace{Type: specs.NetworkNamespace, Path: sb.NetNS}
	ipc := specs.LinuxNamespace{Type: specs.IPCNamespace, Path: sb.IPCNS}
	uts := specs.LinuxNamespace{Type: specs.UTSNamespace, Path: sb.UTSNS}

	tests := []struct {
		name    string
		pod     podspec.Pod
		sb      Sandbox
		want    []specs.LinuxNamespace
		wantErr string
	}{
		{name: "pod namespaces joined", sb: sb, want: append(clone(own), net, ipc, uts)},
		{name: "hostNetwork: host net and uts", pod: podspec.Pod{HostNetwork: true}, sb: Sandbox{IPCNS: sb.IPCNS}, want: append(clone(own), ipc)},
		{name: "hostIPC", pod: podspec.Pod{HostIPC: true}, sb: Sandbox{NetNS: sb.NetNS, UTSNS: sb.UTSNS}, want: append(clone(own), net, uts)},
		{name: "hostPID", pod: podspec.Pod{HostPID: true}, sb: sb, want: append(clone(ownNoPID), net, ipc, uts)},
		{name: "all host", pod: podspec.Pod{HostNetwork: true, HostIPC: true, HostPID: true}, want: clone(ownNoPID)},
		{
			name: "no paths: new namespaces",
			want: append(clone(own), specs.LinuxNamespace{Type: specs.NetworkNamespace}, specs.LinuxNamespace{Type: specs.IPCNamespace}, specs.LinuxNamespace{Type: specs.UTSNamespace}),
		},
		{name: "relative path", sb: Sandbox{NetNS: "netns"}, wantErr: "NetNS"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Default()
			err := WithNamespaces(&tt.pod, tt.sb)(s)
			checkErr(t, err, tt.wantErr)
			if tt.wantErr == "" && !reflect.DeepEqual(s.Linux.Namespaces, tt.want) {
				t.Errorf("namespaces = %+v, want %+v", s.Linux.Namespaces, tt.want)
			}
		})
	}
}

func clone[T any](s []T) []T { return append([]T(nil), s...) }
