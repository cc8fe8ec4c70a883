package spec

import (
	"fmt"
	"maps"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// WithSysctls sets sysctls in the container's namespaces. The agent has
// checked them (namespaced, allowed, in no namespace shared with the host);
// every container of a pod sets the same values in the namespaces they
// share, as containerd sets them on the pod's sandbox container.
func WithSysctls(sysctls map[string]string) SpecOpt {
	return func(s *specs.Spec) error {
		if len(sysctls) == 0 {
			return nil
		}
		if s.Linux.Sysctl == nil {
			s.Linux.Sysctl = map[string]string{}
		}
		maps.Copy(s.Linux.Sysctl, sysctls)
		return nil
	}
}

// WithUnmaskedProc (procMount: Unmasked) drops the masked and read-only
// paths, as the kubelet's ConvertToRuntimeMaskedPaths and
// ConvertToRuntimeReadonlyPaths give none for it.
func WithUnmaskedProc() SpecOpt {
	return func(s *specs.Spec) error {
		s.Linux.MaskedPaths = nil
		s.Linux.ReadonlyPaths = nil
		return nil
	}
}

// Host LSM support, replaced by tests.
var (
	appArmorEnabled = hostAppArmorEnabled
	seLinuxEnabled  = hostSELinuxEnabled
)

// WithAppArmor applies appArmorProfile in the annotation form the agent
// gives ("unconfined", "runtime/default", "localhost/<name>"). On a host
// without AppArmor only "unconfined" (or nothing) is accepted, as the
// kubelet's AppArmor admission refuses a pod that asks for a profile there.
// RuntimeDefault is refused on an AppArmor host too: staticpodd ships no
// default profile of its own (containerd generates and loads one); load a
// profile and name it with Localhost.
func WithAppArmor(profile string) SpecOpt {
	return func(s *specs.Spec) error {
		switch {
		case profile == "":
			return nil
		case profile == "unconfined":
			if appArmorEnabled() {
				s.Process.ApparmorProfile = "unconfined"
			}
			return nil
		case !appArmorEnabled():
			return fmt.Errorf("appArmorProfile %s: AppArmor is not enabled on this host", profile)
		case profile == "runtime/default":
			return fmt.Errorf("appArmorProfile RuntimeDefault: staticpodd has no default AppArmor profile; load one and use type Localhost")
		case strings.HasPrefix(profile, "localhost/") && len(profile) > len("localhost/"):
			s.Process.ApparmorProfile = strings.TrimPrefix(profile, "localhost/")
			return nil
		}
		return fmt.Errorf("appArmorProfile %q: not a profile", profile)
	}
}

// WithSELinux sets the process's SELinux label from seLinuxOptions
// ("user:u", "role:r", "type:t", "level:l"), completed from the host's
// container context as containerd's label.InitLabels does; a host without
// SELinux refuses them with a clear error.
func WithSELinux(options []string) SpecOpt {
	return func(s *specs.Spec) error {
		if len(options) == 0 {
			return nil
		}
		if !seLinuxEnabled() {
			return fmt.Errorf("seLinuxOptions %s: SELinux is not enabled on this host", strings.Join(options, ","))
		}
		process, err := seLinuxLabel(options)
		if err != nil {
			return fmt.Errorf("seLinuxOptions %s: %w", strings.Join(options, ","), err)
		}
		s.Process.SelinuxLabel = process
		return nil
	}
}

// WithSeccomp sets the container's seccomp filter: none for Unconfined, the
// moby/containerd default profile for RuntimeDefault (whose rules depend on
// the capabilities, so it comes after them), the given profile for
// Localhost. A privileged container gets none, as with containerd.
func WithSeccomp(p podspec.Seccomp, privileged bool) SpecOpt {
	return func(s *specs.Spec) error {
		if privileged {
			s.Linux.Seccomp = nil
			return nil
		}
		switch p.Type {
		case "", podspec.SeccompUnconfined:
			s.Linux.Seccomp = nil
			return nil
		case podspec.SeccompRuntimeDefault:
			sc, err := defaultSeccomp(s)
			if err != nil {
				return fmt.Errorf("seccompProfile RuntimeDefault: %w", err)
			}
			s.Linux.Seccomp = sc
			return nil
		case podspec.SeccompLocalhost:
			sc, err := loadSeccomp(p.Profile, s)
			if err != nil {
				return fmt.Errorf("seccompProfile Localhost %s: %w", p.Name, err)
			}
			s.Linux.Seccomp = sc
			return nil
		}
		return fmt.Errorf("seccompProfile: unknown type %q", p.Type)
	}
}
