package manifest

import (
	"fmt"
	"path"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/poddir"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// containerMounts turns c's volumeMounts into bind mounts: a hostPath binds the
// host path, an emptyDir binds its directory under the pod's volume dir (for
// medium Memory a tmpfs volumes.Prepare mounted there, so all containers of the pod
// share it, as with the kubelet).
//
// A subPath (or a subPathExpr, expanded with env) is not joined to the volume's
// path here: a container that can write the volume could have put a symlink
// there. It goes to the runtime as Mount.SubPath, to be resolved inside the
// volume when the container starts (the kubelet's makeMounts and
// PrepareSafeSubpath).
func containerMounts(pod *v1.Pod, c *v1.Container, env []podspec.EnvVar, p Paths) ([]podspec.Mount, error) {
	volumes := map[string]*v1.Volume{}
	for i := range pod.Spec.Volumes {
		volumes[pod.Spec.Volumes[i].Name] = &pod.Spec.Volumes[i]
	}
	var mounts []podspec.Mount
	for _, m := range c.VolumeMounts {
		vol, ok := volumes[m.Name]
		if !ok {
			return nil, fmt.Errorf("volumeMount %s: no volume of that name", m.Name)
		}
		source, err := volumeSource(pod, vol, p)
		if err != nil {
			return nil, err
		}
		sub, err := subPath(m, env)
		if err != nil {
			return nil, fmt.Errorf("volumeMount %s: %w", m.Name, err)
		}
		prop, err := propagation(m, sub)
		if err != nil {
			return nil, fmt.Errorf("volumeMount %s: %w", m.Name, err)
		}
		mounts = append(mounts, podspec.Mount{
			Destination: m.MountPath,
			Type:        "bind",
			Source:      source,
			SubPath:     sub,
			// The kubelet mounts downwardAPI, configMap, secret and
			// projected volumes read-only, whatever the volumeMount says
			// (since CVE-2017-1002102).
			ReadOnly:          m.ReadOnly || vol.DownwardAPI != nil || vol.ConfigMap != nil || vol.Secret != nil || vol.Projected != nil,
			RecursiveReadOnly: recursiveReadOnly(m, p.RecursiveReadOnly),
			Propagation:       prop,
		})
	}
	return mounts, nil
}

// subPath is m's subPath, or its subPathExpr expanded with env, as the
// kubelet's makeMounts checks it: relative, without '..', every variable set.
// "" binds the whole volume.
func subPath(m v1.VolumeMount, env []podspec.EnvVar) (string, error) {
	sub := m.SubPath
	if m.SubPathExpr != "" {
		// kubecontainer.ExpandContainerVolumeMounts
		vars := make(map[string]string, len(env))
		for _, e := range env {
			vars[e.Name] = e.Value
		}
		var missing []string
		sub = expand(m.SubPathExpr, func(key string) string {
			v, ok := vars[key]
			if !ok || v == "" {
				missing = append(missing, key)
			}
			return v
		})
		if len(missing) > 0 {
			slices.Sort(missing)
			return "", fmt.Errorf("subPathExpr %q: missing value for %s", m.SubPathExpr, strings.Join(slices.Compact(missing), ", "))
		}
	}
	if sub == "" {
		return "", nil
	}
	if path.IsAbs(sub) {
		return "", fmt.Errorf("subPath %q must not be an absolute path", sub)
	}
	if hasBacksteps(sub) {
		return "", fmt.Errorf("subPath %q must not contain '..'", sub)
	}
	sub = path.Clean(sub)
	if sub == "." {
		return "", nil
	}
	return sub, nil
}

// volumeSource is where volume vol lives on the host.
func volumeSource(pod *v1.Pod, vol *v1.Volume, p Paths) (string, error) {
	switch {
	case vol.HostPath != nil:
		return vol.HostPath.Path, nil
	case vol.EmptyDir != nil:
		return poddir.Root(p.RootDir).EmptyDir(string(pod.UID), vol.Name), nil
	case vol.DownwardAPI != nil:
		return poddir.Root(p.RootDir).DownwardAPI(string(pod.UID), vol.Name), nil
	case vol.ConfigMap != nil:
		return poddir.Root(p.RootDir).ConfigMap(string(pod.UID), vol.Name), nil
	case vol.Secret != nil:
		return poddir.Root(p.RootDir).Secret(string(pod.UID), vol.Name), nil
	case vol.Projected != nil:
		return poddir.Root(p.RootDir).Projected(string(pod.UID), vol.Name), nil
	}
	return "", fmt.Errorf("volume %s: only hostPath, emptyDir, downwardAPI, configMap, secret and projected are supported", vol.Name)
}

// propagation is m's mountPropagation. A subPath is bound by the runtime by
// file descriptor onto a private mount of its own, which would cut the
// propagation: refused rather than silently made None.
func propagation(m v1.VolumeMount, sub string) (podspec.Propagation, error) {
	if m.MountPropagation == nil {
		return podspec.PropagationNone, nil
	}
	switch *m.MountPropagation {
	case v1.MountPropagationNone:
		return podspec.PropagationNone, nil
	case v1.MountPropagationHostToContainer, v1.MountPropagationBidirectional:
		if sub != "" {
			return "", fmt.Errorf("mountPropagation %s with a subPath is not supported by staticpodd", *m.MountPropagation)
		}
		return podspec.Propagation(*m.MountPropagation), nil
	}
	return "", fmt.Errorf("mountPropagation %q: unknown", *m.MountPropagation)
}

// recursiveReadOnly is the kubelet's resolveRecursiveReadOnly: Enabled is
// recursive (validation made sure the mount is read-only), IfPossible is
// when the kernel can (supported), Disabled or unset is not.
func recursiveReadOnly(m v1.VolumeMount, supported bool) bool {
	if m.RecursiveReadOnly == nil || !m.ReadOnly {
		return false
	}
	switch *m.RecursiveReadOnly {
	case v1.RecursiveReadOnlyEnabled:
		return true
	case v1.RecursiveReadOnlyIfPossible:
		return supported
	}
	return false
}
