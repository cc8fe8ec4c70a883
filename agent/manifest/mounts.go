package manifest

import (
	"fmt"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// containerMounts turns c's volumeMounts into bind mounts: a hostPath binds the
// host path, an emptyDir binds its directory under the pod's volume dir (for
// medium Memory a tmpfs PrepareVolumes mounted there, so all containers of the pod
// share it, as with the kubelet). subPath binds a path inside the volume.
func containerMounts(pod *v1.Pod, c *v1.Container, p Paths) ([]podspec.Mount, error) {
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
		if m.SubPath != "" {
			source = filepath.Join(source, m.SubPath)
		}
		mounts = append(mounts, podspec.Mount{
			Destination: m.MountPath,
			Type:        "bind",
			Source:      source,
			ReadOnly:    m.ReadOnly,
		})
	}
	return mounts, nil
}

// volumeSource is where volume vol lives on the host.
func volumeSource(pod *v1.Pod, vol *v1.Volume, p Paths) (string, error) {
	switch {
	case vol.HostPath != nil:
		return vol.HostPath.Path, nil
	case vol.EmptyDir != nil:
		return p.EmptyDir(string(pod.UID), vol.Name), nil
	}
	return "", fmt.Errorf("volume %s: only hostPath and emptyDir are supported", vol.Name)
}
