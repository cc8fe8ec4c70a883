package manifest

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilsysctl "k8s.io/component-helpers/node/util/sysctl"
)

// podSecurity checks the pod's securityContext fields a container's
// process is made with, as the API server's validatePodSpecSecurityContext.
func (v *validator) podSecurity(s *v1.PodSpec, p *field.Path) {
	sc := s.SecurityContext
	if sc == nil {
		return
	}
	v.seccompProfile(sc.SeccompProfile, p.Child("seccompProfile"))
	v.appArmorProfile(sc.AppArmorProfile, p.Child("appArmorProfile"))
	v.windowsOptions(sc.WindowsOptions, p.Child("windowsOptions"))
	if sc.FSGroupChangePolicy != nil {
		switch *sc.FSGroupChangePolicy {
		case v1.FSGroupChangeOnRootMismatch, v1.FSGroupChangeAlways:
		default:
			v.add(field.NotSupported(p.Child("fsGroupChangePolicy"), *sc.FSGroupChangePolicy,
				[]v1.PodFSGroupChangePolicy{v1.FSGroupChangeOnRootMismatch, v1.FSGroupChangeAlways}))
		}
	}
	names := map[string]bool{}
	for i, sys := range sc.Sysctls {
		sp := p.Child("sysctls").Index(i).Child("name")
		switch {
		case sys.Name == "":
			v.add(field.Required(sp, ""))
		case len(sys.Name) > sysctlMaxLength || !sysctlName().MatchString(sys.Name):
			v.add(field.Invalid(sp, sys.Name, fmt.Sprintf("must have at most %d characters and match regex %s", sysctlMaxLength, sysctlName())))
		case names[sys.Name]:
			v.add(field.Duplicate(sp, sys.Name))
		}
		// The API's ValidateHostSysctl.
		switch ns, _, _ := utilsysctl.GetNamespace(sys.Name); {
		case s.HostNetwork && ns == utilsysctl.NetNamespace:
			v.add(field.Invalid(sp, sys.Name, "may not be specified when 'hostNetwork' is true"))
		case s.HostIPC && ns == utilsysctl.IPCNamespace:
			v.add(field.Invalid(sp, sys.Name, "may not be specified when 'hostIPC' is true"))
		}
		names[sys.Name] = true
	}
}

// The API's sysctl name (IsValidSysctlName).
const sysctlMaxLength = 253

var sysctlName = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$`)
})

// containerSecurity checks a container's securityContext as the API
// server's ValidateSecurityContext, with hostUsers always true (staticpodd
// makes no user namespaces).
func (v *validator) containerSecurity(sc *v1.SecurityContext, p *field.Path) {
	if sc == nil {
		return
	}
	v.seccompProfile(sc.SeccompProfile, p.Child("seccompProfile"))
	v.appArmorProfile(sc.AppArmorProfile, p.Child("appArmorProfile"))
	v.windowsOptions(sc.WindowsOptions, p.Child("windowsOptions"))
	if pm := sc.ProcMount; pm != nil {
		switch *pm {
		case v1.DefaultProcMount:
		case v1.UnmaskedProcMount:
			v.add(field.Invalid(p.Child("procMount"), *pm, "`hostUsers` must be false to use `Unmasked`, and staticpodd runs no pod in a user namespace of its own"))
		default:
			v.add(field.NotSupported(p.Child("procMount"), *pm, []v1.ProcMountType{v1.DefaultProcMount, v1.UnmaskedProcMount}))
		}
	}
	if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
		if sc.Privileged != nil && *sc.Privileged {
			v.add(field.Invalid(p, "privileged", "cannot set `allowPrivilegeEscalation` to false and `privileged` to true"))
		}
		if sc.Capabilities != nil {
			for _, c := range sc.Capabilities.Add {
				if c == "CAP_SYS_ADMIN" {
					v.add(field.Invalid(p, "CAP_SYS_ADMIN", "cannot set `allowPrivilegeEscalation` to false and `capabilities.Add` CAP_SYS_ADMIN"))
				}
			}
		}
	}
}

// seccompProfile is the API's validateSeccompProfileField.
func (v *validator) seccompProfile(sp *v1.SeccompProfile, p *field.Path) {
	if sp == nil {
		return
	}
	switch sp.Type {
	case v1.SeccompProfileTypeLocalhost:
		if sp.LocalhostProfile == nil {
			v.add(field.Required(p.Child("localhostProfile"), "must be set when seccomp type is Localhost"))
		} else {
			lp := p.Child("localhostProfile")
			v.relative(lp, *sp.LocalhostProfile)
			if *sp.LocalhostProfile == "" {
				v.add(field.Required(lp, "must be set when seccomp type is Localhost"))
			}
		}
		return
	case v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined:
	case "":
		v.add(field.Required(p.Child("type"), "type is required when seccompProfile is set"))
	default:
		v.add(field.NotSupported(p.Child("type"), sp.Type,
			[]v1.SeccompProfileType{v1.SeccompProfileTypeLocalhost, v1.SeccompProfileTypeRuntimeDefault, v1.SeccompProfileTypeUnconfined}))
	}
	if sp.LocalhostProfile != nil {
		v.add(field.Invalid(p.Child("localhostProfile"), *sp.LocalhostProfile, "can only be set when seccomp type is Localhost"))
	}
}

// appArmorProfile is the API's ValidateAppArmorProfileField.
func (v *validator) appArmorProfile(ap *v1.AppArmorProfile, p *field.Path) {
	if ap == nil {
		return
	}
	switch ap.Type {
	case v1.AppArmorProfileTypeLocalhost:
		if ap.LocalhostProfile == nil || *ap.LocalhostProfile == "" {
			v.add(field.Required(p.Child("localhostProfile"), "must be set when AppArmor type is Localhost"))
		}
		return
	case v1.AppArmorProfileTypeRuntimeDefault, v1.AppArmorProfileTypeUnconfined:
	case "":
		v.add(field.Required(p.Child("type"), "type is required when appArmorProfile is set"))
	default:
		v.add(field.NotSupported(p.Child("type"), ap.Type,
			[]v1.AppArmorProfileType{v1.AppArmorProfileTypeLocalhost, v1.AppArmorProfileTypeRuntimeDefault, v1.AppArmorProfileTypeUnconfined}))
	}
	if ap.LocalhostProfile != nil {
		v.add(field.Invalid(p.Child("localhostProfile"), *ap.LocalhostProfile, "can only be set when AppArmor type is Localhost"))
	}
}

// windowsOptions are refused: staticpodd runs Linux containers only, and
// the kubelet on Linux would ignore them silently.
func (v *validator) windowsOptions(w *v1.WindowsSecurityContextOptions, p *field.Path) {
	if w != nil {
		v.add(field.Forbidden(p, "Windows options are not supported: staticpodd runs Linux containers"))
	}
}

// mountPropagation is the API's validateMountPropagation.
func (v *validator) mountPropagation(p *field.Path, mp *v1.MountPropagationMode, c *v1.Container) {
	if mp == nil {
		return
	}
	switch *mp {
	case v1.MountPropagationNone, v1.MountPropagationHostToContainer:
	case v1.MountPropagationBidirectional:
		if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || !*sc.Privileged {
			v.add(field.Forbidden(p, "Bidirectional mount propagation is available only to privileged containers"))
		}
	default:
		v.add(field.NotSupported(p, *mp, []v1.MountPropagationMode{v1.MountPropagationBidirectional, v1.MountPropagationHostToContainer, v1.MountPropagationNone}))
	}
}

// mountRecursiveReadOnly is the API's validateMountRecursiveReadOnly.
func mountRecursiveReadOnly(v *validator, mp *field.Path, m v1.VolumeMount) {
	if m.RecursiveReadOnly == nil {
		return
	}
	p := mp.Child("recursiveReadOnly")
	switch *m.RecursiveReadOnly {
	case v1.RecursiveReadOnlyDisabled:
	case v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible:
		if !m.ReadOnly {
			v.add(field.Forbidden(p, "may only be specified when readOnly is true"))
		}
		if m.MountPropagation != nil && *m.MountPropagation != v1.MountPropagationNone {
			v.add(field.Forbidden(p, "may only be specified when mountPropagation is None or not specified"))
		}
	default:
		v.add(field.NotSupported(p, *m.RecursiveReadOnly,
			[]v1.RecursiveReadOnlyMode{v1.RecursiveReadOnlyDisabled, v1.RecursiveReadOnlyEnabled, v1.RecursiveReadOnlyIfPossible}))
	}
}

// downwardAPI checks a downwardAPI volume as the API server's
// validateDownwardAPIVolumeSource: modes, paths, one reference per item,
// the fields a volume may name, a resourceFieldRef's container.
func (v *validator) downwardAPI(p *field.Path, d *v1.DownwardAPIVolumeSource) {
	mode := func(fp *field.Path, m *int32) {
		if m != nil && (*m > 0o777 || *m < 0) {
			v.add(field.Invalid(fp, *m, "must be a number between 0 and 0777 (octal), both inclusive"))
		}
	}
	mode(p.Child("defaultMode"), d.DefaultMode)
	paths := map[string]bool{}
	for i, it := range d.Items {
		ip := p.Child("items").Index(i)
		if it.Path == "" {
			v.add(field.Required(ip.Child("path"), ""))
		} else {
			v.relative(ip.Child("path"), it.Path)
			if strings.HasPrefix(it.Path, "..") {
				v.add(field.Invalid(ip.Child("path"), it.Path, "must not start with '..'"))
			}
			if paths[path.Clean(it.Path)] {
				v.add(field.Duplicate(ip.Child("path"), it.Path))
			}
			paths[path.Clean(it.Path)] = true
		}
		mode(ip.Child("mode"), it.Mode)
		switch {
		case it.FieldRef != nil && it.ResourceFieldRef != nil:
			v.add(field.Invalid(ip, "resource", "fieldRef and resourceFieldRef can not be specified simultaneously"))
		case it.FieldRef != nil:
			fp := it.FieldRef.FieldPath
			if !slices.Contains(downwardAPIFieldPaths, fp) && !strings.HasPrefix(fp, "metadata.labels['") && !strings.HasPrefix(fp, "metadata.annotations['") {
				v.add(field.NotSupported(ip.Child("fieldRef", "fieldPath"), fp, downwardAPIFieldPaths))
			}
		case it.ResourceFieldRef != nil:
			r := it.ResourceFieldRef
			rp := ip.Child("resourceFieldRef")
			switch {
			case r.ContainerName == "":
				v.add(field.Required(rp.Child("containerName"), "must be set for a volume"))
			case !slices.Contains(v.containers, r.ContainerName):
				v.add(field.NotFound(rp.Child("containerName"), r.ContainerName))
			}
			if !slices.Contains(resourceFields, r.Resource) {
				v.add(field.NotSupported(rp.Child("resource"), r.Resource, resourceFields))
			}
		default:
			v.add(field.Required(ip, "one of fieldRef and resourceFieldRef is required"))
		}
	}
}
