package volumes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/atomicdir"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
)

// downwardAPIFiles is the kubelet's downwardapi CollectData: each item's
// value, at its path, with its mode or the volume's defaultMode (0644).
func downwardAPIFiles(pod *v1.Pod, src *v1.DownwardAPIVolumeSource, h manifest.Host) (map[string]atomicdir.File, error) {
	mode := fs.FileMode(v1.DownwardAPIVolumeSourceDefaultMode)
	if src.DefaultMode != nil {
		mode = fs.FileMode(*src.DefaultMode)
	}
	files := make(map[string]atomicdir.File, len(src.Items))
	for i := range src.Items {
		it := &src.Items[i]
		m := mode
		if it.Mode != nil {
			m = fs.FileMode(*it.Mode)
		}
		value, err := manifest.DownwardAPIValue(pod, it, h)
		if err != nil {
			return nil, fmt.Errorf("item %s: %w", it.Path, err)
		}
		files[it.Path] = atomicdir.File{Data: []byte(value), Mode: m}
	}
	return files, nil
}

// writeDownwardAPI writes the pod's downwardAPI volumes, each in the
// kubelet's atomic layout, files owned by the pod's fsGroup if it has one;
// a volume whose values did not change is left alone.
func writeDownwardAPI(pod *v1.Pod, vol *v1.Volume, root poddir.Root, h manifest.Host) error {
	dir := root.DownwardAPI(string(pod.UID), vol.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create downwardAPI volume: %w", err)
	}
	files, err := downwardAPIFiles(pod, vol.DownwardAPI, h)
	if err != nil {
		return fmt.Errorf("downwardAPI: %w", err)
	}
	gid := -1
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		gid = int(*sc.FSGroup)
	}
	if _, err := atomicdir.Write(dir, files, gid); err != nil {
		return fmt.Errorf("write downwardAPI volume: %w", err)
	}
	return nil
}

// Refresh rewrites the pod's downwardAPI, configMap, secret and projected
// volumes where their values changed, each in one swap of its "..data"
// (a manifest with its own uid whose labels or annotations were edited
// keeps running, as in the kubelet, and its volume follows; so do its
// volumes when h.Objects has new ConfigMaps or Secrets). A volume that
// cannot be written keeps what it had.
func Refresh(pod *v1.Pod, root poddir.Root, h manifest.Host) error {
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		switch {
		case vol.DownwardAPI != nil:
			if err := writeDownwardAPI(pod, vol, root, h); err != nil {
				errs = append(errs, fmt.Errorf("volume %s of pod %s: %w", vol.Name, pod.Name, err))
			}
		case vol.ConfigMap != nil, vol.Secret != nil, vol.Projected != nil:
			if err := writeObjectVolume(pod, vol, root, h); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
