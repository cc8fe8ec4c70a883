package manifest

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// needsSeccomp tells whether a container with profile sp gets a seccomp
// filter: any profile but Unconfined, unless it is privileged (which gets
// none, as with containerd; oci/spec WithSeccomp).
func needsSeccomp(sp podspec.Seccomp, privileged bool) bool {
	return !privileged && sp.Type != "" && sp.Type != podspec.SeccompUnconfined
}

// SeccompRefusals are the errors a runtime without seccomp (reason says
// why, Paths.NoSeccomp) has for pod, one per seccompProfile field that
// gives an unprivileged container a filter, as conversion would refuse
// them; origin names the manifest. Only the manifest is looked at: with
// the configuration's seccompDefault, containers that name no profile are
// refused too.
func SeccompRefusals(pod *v1.Pod, origin, reason string) []*Error {
	var out []*Error
	seen := map[string]bool{}
	add := func(path string, sp *v1.SeccompProfile) {
		if sp == nil || sp.Type == v1.SeccompProfileTypeUnconfined || seen[path] {
			return
		}
		seen[path] = true
		out = append(out, &Error{Origin: origin, Field: path, Value: string(sp.Type),
			Reason: fmt.Sprintf("seccompProfile %s: %s", sp.Type, reason)})
	}
	var podProfile *v1.SeccompProfile
	if sc := pod.Spec.SecurityContext; sc != nil {
		podProfile = sc.SeccompProfile
	}
	for _, list := range []struct {
		field string
		cs    []v1.Container
	}{{"initContainers", pod.Spec.InitContainers}, {"containers", pod.Spec.Containers}} {
		for i := range list.cs {
			sc := list.cs[i].SecurityContext
			if sc != nil && sc.Privileged != nil && *sc.Privileged {
				continue
			}
			if sc != nil && sc.SeccompProfile != nil {
				add(fmt.Sprintf("spec.%s[%d].securityContext.seccompProfile", list.field, i), sc.SeccompProfile)
			} else {
				add("spec.securityContext.seccompProfile", podProfile)
			}
		}
	}
	return out
}
