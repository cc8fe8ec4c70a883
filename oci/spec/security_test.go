//go:build linux

package spec

import (
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

func TestWithSeccomp(t *testing.T) {
	for _, tc := range []struct {
		name       string
		p          podspec.Seccomp
		privileged bool
		caps       []string
		want       string // DefaultAction; "" no filter
		wantErr    string
	}{
		{"unset", podspec.Seccomp{}, false, nil, "", ""},
		{"unconfined", podspec.Seccomp{Type: podspec.SeccompUnconfined}, false, nil, "", ""},
		{"default", podspec.Seccomp{Type: podspec.SeccompRuntimeDefault}, false, nil, "SCMP_ACT_ERRNO", ""},
		{"privileged", podspec.Seccomp{Type: podspec.SeccompRuntimeDefault}, true, nil, "", ""},
		{"localhost docker format", podspec.Seccomp{Type: podspec.SeccompLocalhost, Name: "a.json",
			Profile: []byte(`{"defaultAction":"SCMP_ACT_LOG","syscalls":[{"name":"mkdir","action":"SCMP_ACT_ERRNO"}]}`)}, false, nil, "SCMP_ACT_LOG", ""},
		{"localhost oci format", podspec.Seccomp{Type: podspec.SeccompLocalhost, Name: "b.json",
			Profile: []byte(`{"defaultAction":"SCMP_ACT_ALLOW","architectures":["SCMP_ARCH_X86_64"],"syscalls":[{"names":["mkdir"],"action":"SCMP_ACT_ERRNO"}]}`)}, false, nil, "SCMP_ACT_ALLOW", ""},
		{"localhost not json", podspec.Seccomp{Type: podspec.SeccompLocalhost, Name: "c.json", Profile: []byte("defaultAction: allow")}, false, nil, "", "seccompProfile Localhost c.json"},
		{"localhost empty", podspec.Seccomp{Type: podspec.SeccompLocalhost, Name: "d.json", Profile: []byte("{}")}, false, nil, "", "neither defaultAction nor syscalls"},
		{"unknown", podspec.Seccomp{Type: "Strict"}, false, nil, "", `unknown type "Strict"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Default()
			err := WithSeccomp(tc.p, tc.privileged)(s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if s.Linux.Seccomp != nil {
				got = string(s.Linux.Seccomp.DefaultAction)
			}
			if got != tc.want {
				t.Errorf("default action %q, want %q", got, tc.want)
			}
		})
	}
}

// The default profile follows the capabilities: with CAP_SYS_ADMIN it
// allows mount(2), without it not.
func TestDefaultSeccompFollowsCapabilities(t *testing.T) {
	allows := func(s *specs.Spec, name string) bool {
		for _, sc := range s.Linux.Seccomp.Syscalls {
			if sc.Action == specs.ActAllow {
				for _, n := range sc.Names {
					if n == name {
						return true
					}
				}
			}
		}
		return false
	}
	s := Default()
	if err := WithSeccomp(podspec.Seccomp{Type: podspec.SeccompRuntimeDefault}, false)(s); err != nil {
		t.Fatal(err)
	}
	if allows(s, "mount") {
		t.Error("default profile without CAP_SYS_ADMIN allows mount")
	}
	s = Default()
	if err := apply(s, WithCapabilityChanges([]string{"SYS_ADMIN"}, nil), WithSeccomp(podspec.Seccomp{Type: podspec.SeccompRuntimeDefault}, false)); err != nil {
		t.Fatal(err)
	}
	if !allows(s, "mount") {
		t.Error("default profile with CAP_SYS_ADMIN does not allow mount")
	}
}

func TestLSMOptionsWithoutTheLSM(t *testing.T) {
	defer func(a, s func() bool) { appArmorEnabled, seLinuxEnabled = a, s }(appArmorEnabled, seLinuxEnabled)
	off := func() bool { return false }
	on := func() bool { return true }
	appArmorEnabled, seLinuxEnabled = off, off
	for _, tc := range []struct {
		name    string
		opt     SpecOpt
		wantErr string
		want    string
	}{
		{"no apparmor asked", WithAppArmor(""), "", ""},
		{"unconfined without apparmor", WithAppArmor("unconfined"), "", ""},
		{"localhost without apparmor", WithAppArmor("localhost/mine"), "AppArmor is not enabled on this host", ""},
		{"default without apparmor", WithAppArmor("runtime/default"), "AppArmor is not enabled on this host", ""},
		{"selinux without selinux", WithSELinux([]string{"type:spc_t"}), "SELinux is not enabled on this host", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Default()
			err := tc.opt(s)
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if tc.wantErr == "" && err != nil {
				t.Fatal(err)
			}
			if s.Process.ApparmorProfile != tc.want {
				t.Errorf("profile %q, want %q", s.Process.ApparmorProfile, tc.want)
			}
		})
	}
	appArmorEnabled = on
	s := Default()
	if err := WithAppArmor("localhost/mine")(s); err != nil || s.Process.ApparmorProfile != "mine" {
		t.Errorf("localhost/mine with AppArmor: profile %q err %v", s.Process.ApparmorProfile, err)
	}
	if err := WithAppArmor("runtime/default")(Default()); err == nil || !strings.Contains(err.Error(), "use type Localhost") {
		t.Errorf("runtime/default with AppArmor: err %v, want the reason", err)
	}
}

func TestMountPropagationAndRRO(t *testing.T) {
	info := func(shared, slave bool) func(string) (bool, bool, string, error) {
		return func(string) (bool, bool, string, error) { return shared, slave, "/mnt", nil }
	}
	for _, tc := range []struct {
		name        string
		m           podspec.Mount
		shared      bool
		slave       bool
		wantOpts    string
		wantRootfs  string
		wantErrText string
	}{
		{"none", podspec.Mount{Destination: "/v", Type: "bind", Source: "/mnt"}, false, false, "rbind,rprivate,rw", "", ""},
		{"rro", podspec.Mount{Destination: "/v", Type: "bind", Source: "/mnt", ReadOnly: true, RecursiveReadOnly: true}, false, false, "rbind,rprivate,rro", "", ""},
		{"host to container on a slave", podspec.Mount{Destination: "/v", Type: "bind", Source: "/mnt", Propagation: podspec.PropagationHostToContainer}, false, true, "rbind,rslave,rw", "rslave", ""},
		{"bidirectional", podspec.Mount{Destination: "/v", Type: "bind", Source: "/mnt", Propagation: podspec.PropagationBidirectional}, true, false, "rbind,rshared,rw", "rshared", ""},
		{"bidirectional on a slave", podspec.Mount{Destination: "/v", Type: "bind", Source: "/mnt", Propagation: podspec.PropagationBidirectional}, false, true, "", "", "which is not a shared mount"},
		{"host to container on a private mount", podspec.Mount{Destination: "/v", Type: "bind", Source: "/mnt", Propagation: podspec.PropagationHostToContainer}, false, false, "", "", "neither a shared nor a slave mount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Default()
			err := apply(s, WithMounts([]podspec.Mount{tc.m}), WithMountPropagation([]podspec.Mount{tc.m}, info(tc.shared, tc.slave)))
			if tc.wantErrText != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErrText) {
					t.Fatalf("err %v, want %q", err, tc.wantErrText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			m := s.Mounts[len(s.Mounts)-1]
			if got := strings.Join(m.Options, ","); got != tc.wantOpts {
				t.Errorf("options %q, want %q", got, tc.wantOpts)
			}
			if s.Linux.RootfsPropagation != tc.wantRootfs {
				t.Errorf("rootfs propagation %q, want %q", s.Linux.RootfsPropagation, tc.wantRootfs)
			}
		})
	}
}
