package manifest

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// SeccompDir is where Localhost seccomp profiles live under the root
// directory: the kubelet's seccompProfileRoot, <root-dir>/seccomp.
const SeccompDir = "seccomp"

// SeccompRoot is <RootDir>/seccomp, where Localhost profiles are read from.
func (p Paths) SeccompRoot() string { return pathJoin(p.RootDir, SeccompDir) }

// seccompProfile is the profile that applies to c: its own, else the pod's.
func seccompProfile(pod *v1.Pod, c *v1.Container) *v1.SeccompProfile {
	if c.SecurityContext != nil && c.SecurityContext.SeccompProfile != nil {
		return c.SecurityContext.SeccompProfile
	}
	if ps := pod.Spec.SecurityContext; ps != nil && ps.SeccompProfile != nil {
		return ps.SeccompProfile
	}
	return nil
}

// LocalhostSeccompProfile names the Localhost seccomp profile c's
// conversion needs in Host.SeccompProfile, a path relative to
// Paths.SeccompRoot; false when c needs none, or names one that conversion
// refuses without reading it.
func LocalhostSeccompProfile(pod *v1.Pod, c *v1.Container) (string, bool) {
	sp := seccompProfile(pod, c)
	if sp == nil || sp.Type != v1.SeccompProfileTypeLocalhost || sp.LocalhostProfile == nil {
		return "", false
	}
	name := *sp.LocalhostProfile
	return name, validLocalhostProfile(name)
}

func validLocalhostProfile(name string) bool {
	return name != "" && !path.IsAbs(name) && !hasBacksteps(name)
}

// seccomp is the kubelet's getSeccompProfile: the container's
// seccompProfile, else the pod's, else RuntimeDefault when the
// configuration's seccompDefault is true, else Unconfined. A Localhost
// profile is the one the caller read into h.
func seccomp(pod *v1.Pod, c *v1.Container, p Paths, h Host) (podspec.Seccomp, error) {
	sp := seccompProfile(pod, c)
	if sp == nil {
		if p.SeccompDefault {
			return podspec.Seccomp{Type: podspec.SeccompRuntimeDefault}, nil
		}
		return podspec.Seccomp{Type: podspec.SeccompUnconfined}, nil
	}
	switch sp.Type {
	case v1.SeccompProfileTypeRuntimeDefault:
		return podspec.Seccomp{Type: podspec.SeccompRuntimeDefault}, nil
	case v1.SeccompProfileTypeUnconfined:
		return podspec.Seccomp{Type: podspec.SeccompUnconfined}, nil
	case v1.SeccompProfileTypeLocalhost:
		if sp.LocalhostProfile == nil || *sp.LocalhostProfile == "" {
			return podspec.Seccomp{}, fmt.Errorf("seccompProfile: localhostProfile must be set if seccompProfile type is Localhost")
		}
		name := *sp.LocalhostProfile
		if !validLocalhostProfile(name) {
			return podspec.Seccomp{}, fmt.Errorf("seccompProfile: localhostProfile %q must be a relative path without '..'", name)
		}
		if h.SeccompErr != nil {
			return podspec.Seccomp{}, fmt.Errorf("seccompProfile: localhostProfile %s: %w", name, h.SeccompErr)
		}
		if h.SeccompProfile == nil {
			return podspec.Seccomp{}, fmt.Errorf("seccompProfile: localhostProfile %s: not read", name)
		}
		return podspec.Seccomp{Type: podspec.SeccompLocalhost, Name: name, Profile: h.SeccompProfile}, nil
	}
	return podspec.Seccomp{}, fmt.Errorf("seccompProfile: unknown type %q", sp.Type)
}

func pathJoin(dir, name string) string { return strings.TrimSuffix(dir, "/") + "/" + name }

// MaxSeccompProfile bounds what is read of a profile: Docker's default
// profile is 20 KiB.
const MaxSeccompProfile = 1 << 20

// appArmor is the kubelet's apparmor.GetProfile in its annotation form: the
// container's appArmorProfile, else the pod's deprecated per-container
// annotation, else the pod's appArmorProfile.
func appArmor(pod *v1.Pod, c *v1.Container) (string, error) {
	var ap *v1.AppArmorProfile
	if c.SecurityContext != nil && c.SecurityContext.AppArmorProfile != nil {
		ap = c.SecurityContext.AppArmorProfile
	} else if a, ok := pod.Annotations[v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix+c.Name]; ok {
		switch {
		case a == v1.DeprecatedAppArmorBetaProfileRuntimeDefault:
			return "runtime/default", nil
		case a == v1.DeprecatedAppArmorBetaProfileNameUnconfined:
			return "unconfined", nil
		case strings.HasPrefix(a, v1.DeprecatedAppArmorBetaProfileNamePrefix) && len(a) > len(v1.DeprecatedAppArmorBetaProfileNamePrefix):
			return a, nil
		}
		return "", fmt.Errorf("annotation %s%s: %q is not an AppArmor profile", v1.DeprecatedAppArmorBetaContainerAnnotationKeyPrefix, c.Name, a)
	} else if ps := pod.Spec.SecurityContext; ps != nil && ps.AppArmorProfile != nil {
		ap = ps.AppArmorProfile
	}
	if ap == nil {
		return "", nil
	}
	switch ap.Type {
	case v1.AppArmorProfileTypeRuntimeDefault:
		return "runtime/default", nil
	case v1.AppArmorProfileTypeUnconfined:
		return "unconfined", nil
	case v1.AppArmorProfileTypeLocalhost:
		if ap.LocalhostProfile == nil || strings.TrimSpace(*ap.LocalhostProfile) == "" {
			return "", fmt.Errorf("appArmorProfile: localhostProfile must be set if type is Localhost")
		}
		return v1.DeprecatedAppArmorBetaProfileNamePrefix + *ap.LocalhostProfile, nil
	}
	return "", fmt.Errorf("appArmorProfile: unknown type %q", ap.Type)
}

// seLinuxOptions are the container's seLinuxOptions, else the pod's (the
// kubelet's DetermineEffectiveSecurityContext takes the container's whole),
// as containerd hands them to its label code: "user:u", "role:r", ...
func seLinuxOptions(pod *v1.Pod, c *v1.Container) []string {
	var o *v1.SELinuxOptions
	if c.SecurityContext != nil && c.SecurityContext.SELinuxOptions != nil {
		o = c.SecurityContext.SELinuxOptions
	} else if ps := pod.Spec.SecurityContext; ps != nil {
		o = ps.SELinuxOptions
	}
	if o == nil {
		return nil
	}
	var out []string
	for _, kv := range [][2]string{{"user", o.User}, {"role", o.Role}, {"type", o.Type}, {"level", o.Level}} {
		if kv[1] != "" {
			out = append(out, kv[0]+":"+kv[1])
		}
	}
	return out
}

// safeSysctls is the kubelet's safe sysctl list (pkg/kubelet/sysctl), each
// with the kernel version from which it is namespaced.
var safeSysctls = []struct{ name, kernel string }{
	{"kernel.shm_rmid_forced", ""},
	{"net.ipv4.ip_local_port_range", ""},
	{"net.ipv4.tcp_syncookies", ""},
	{"net.ipv4.ping_group_range", ""},
	{"net.ipv4.ip_unprivileged_port_start", ""},
	{"net.ipv4.ip_local_reserved_ports", "3.16"},
	{"net.ipv4.tcp_keepalive_time", "4.5"},
	{"net.ipv4.tcp_fin_timeout", "4.6"},
	{"net.ipv4.tcp_keepalive_intvl", "4.5"},
	{"net.ipv4.tcp_keepalive_probes", "4.5"},
	{"net.ipv4.tcp_rmem", "4.15"},
	{"net.ipv4.tcp_wmem", "4.15"},
	{"net.ipv4.tcp_slow_start_after_idle", "4.15"},
	{"net.ipv4.tcp_notsent_lowat", "4.6"},
}

// SafeSysctls is the kubelet's SafeSysctlAllowlist for a kernel of the
// given release ("6.1.0-18-amd64"); an unreadable release gets the
// sysctls that need no particular kernel.
func SafeSysctls(release string) []string {
	have, okHave := kernelVersion(release)
	var out []string
	for _, s := range safeSysctls {
		if s.kernel != "" {
			want, _ := kernelVersion(s.kernel)
			if !okHave || have[0] < want[0] || have[0] == want[0] && have[1] < want[1] {
				continue
			}
		}
		out = append(out, s.name)
	}
	return out
}

func kernelVersion(release string) ([2]int, bool) {
	parts := strings.SplitN(release, ".", 3)
	if len(parts) < 2 {
		return [2]int{}, false
	}
	major, err1 := strconv.Atoi(parts[0])
	minor := parts[1]
	if i := strings.IndexFunc(minor, func(r rune) bool { return r < '0' || r > '9' }); i >= 0 {
		minor = minor[:i]
	}
	min, err2 := strconv.Atoi(minor)
	if err1 != nil || err2 != nil {
		return [2]int{}, false
	}
	return [2]int{major, min}, true
}

// podSysctls checks the pod's sysctls against the allowlist (the safe
// sysctls and allowedUnsafeSysctls) as the kubelet's sysctl admission
// (patternAllowlist.validateSysctl) does, and returns them by name, with
// '/' separators normalised to '.'.
func podSysctls(pod *v1.Pod, p Paths) (map[string]string, error) {
	sc := pod.Spec.SecurityContext
	if sc == nil || len(sc.Sysctls) == 0 {
		return nil, nil
	}
	allowed := append(slicesClone(p.SafeSysctls), p.AllowedUnsafeSysctls...)
	out := make(map[string]string, len(sc.Sysctls))
	for _, s := range sc.Sysctls {
		name := utilsysctl.NormalizeName(s.Name)
		ns, _, _ := utilsysctl.GetNamespace(name)
		switch {
		case ns == utilsysctl.UnknownNamespace:
			return nil, fmt.Errorf("forbidden sysctl %q: not known to be namespaced: it would change the whole host", name)
		case ns == utilsysctl.NetNamespace && pod.Spec.HostNetwork:
			return nil, fmt.Errorf("forbidden sysctl %q: not allowed with host net enabled", name)
		case ns == utilsysctl.IPCNamespace && pod.Spec.HostIPC:
			return nil, fmt.Errorf("forbidden sysctl %q: not allowed with host IPC enabled", name)
		case ns == utilsysctl.UserNamespace || ns == utilsysctl.UTSNamespace && pod.Spec.HostNetwork:
			return nil, fmt.Errorf("forbidden sysctl %q: not allowed with host %s enabled", name, ns)
		}
		if !sysctlAllowed(name, allowed) {
			return nil, fmt.Errorf("forbidden sysctl %q: not allowlisted (neither a safe sysctl nor in allowedUnsafeSysctls)", name)
		}
		out[name] = s.Value
	}
	return out, nil
}

func sysctlAllowed(name string, allowed []string) bool {
	for _, a := range allowed {
		_, prefix, prefixed := utilsysctl.GetNamespace(a)
		if prefixed && strings.HasPrefix(name, prefix) || !prefixed && name == prefix {
			return true
		}
	}
	return false
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }
