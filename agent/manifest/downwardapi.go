package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/atomicdir"
)

// DownwardAPI is the host directory of downwardAPI volume name, as the
// kubelet lays it out: <RootDir>/pods/<uid>/volumes/kubernetes.io~downward-api/<name>.
func (p Paths) DownwardAPI(uid, name string) string {
	return filepath.Join(p.PodDir(uid), "volumes", "kubernetes.io~downward-api", name)
}

// downwardAPIFieldPaths are the fields a downwardAPI volume item may name
// (the API's validDownwardAPIFieldPathExpressions), besides the
// metadata.labels['key'] and metadata.annotations['key'] subscripts.
var downwardAPIFieldPaths = []string{
	"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations",
}

// downwardAPIFiles is the kubelet's downwardapi CollectData: each item's
// value, at its path, with its mode or the volume's defaultMode (0644).
func downwardAPIFiles(pod *v1.Pod, src *v1.DownwardAPIVolumeSource, p Paths) (map[string]atomicdir.File, error) {
	mode := fs.FileMode(v1.DownwardAPIVolumeSourceDefaultMode)
	if src.DefaultMode != nil {
		mode = fs.FileMode(*src.DefaultMode)
	}
	files := make(map[string]atomicdir.File, len(src.Items))
	for _, it := range src.Items {
		m := mode
		if it.Mode != nil {
			m = fs.FileMode(*it.Mode)
		}
		var value string
		switch {
		case it.FieldRef != nil:
			switch it.FieldRef.FieldPath {
			case "metadata.labels":
				value = formatMap(pod.Labels)
			case "metadata.annotations":
				value = formatMap(pod.Annotations)
			default:
				v, err := podField(pod, it.FieldRef.FieldPath)
				if err != nil {
					return nil, fmt.Errorf("item %s: %w", it.Path, err)
				}
				value = v
			}
		case it.ResourceFieldRef != nil:
			c := findContainer(pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				return nil, fmt.Errorf("item %s: resourceFieldRef: no container %q", it.Path, it.ResourceFieldRef.ContainerName)
			}
			v, err := resourceField(c, it.ResourceFieldRef, p)
			if err != nil {
				return nil, fmt.Errorf("item %s: %w", it.Path, err)
			}
			value = v
		default:
			return nil, fmt.Errorf("item %s: neither fieldRef nor resourceFieldRef", it.Path)
		}
		files[it.Path] = atomicdir.File{Data: []byte(value), Mode: m}
	}
	return files, nil
}

func findContainer(pod *v1.Pod, name string) *v1.Container {
	for _, c := range AllContainers(pod) {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// formatMap is the kubelet's fieldpath.FormatMap: key="value" lines, sorted.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(k + "=" + strconv.Quote(m[k]))
	}
	return b.String()
}

// writeDownwardAPI writes the pod's downwardAPI volumes, each in the
// kubelet's atomic layout, files owned by the pod's fsGroup if it has one;
// a volume whose values did not change is left alone.
func writeDownwardAPI(pod *v1.Pod, vol *v1.Volume, p Paths) error {
	dir := p.DownwardAPI(string(pod.UID), vol.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create downwardAPI volume: %w", err)
	}
	files, err := downwardAPIFiles(pod, vol.DownwardAPI, p)
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

// RefreshVolumes rewrites the pod's downwardAPI volumes where their values
// changed (a manifest with its own uid whose labels or annotations were
// edited keeps running, as in the kubelet, and its volume follows).
func RefreshVolumes(pod *v1.Pod, p Paths) error {
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		if vol.DownwardAPI == nil {
			continue
		}
		if err := writeDownwardAPI(pod, vol, p); err != nil {
			errs = append(errs, fmt.Errorf("volume %s of pod %s: %w", vol.Name, pod.Name, err))
		}
	}
	return errors.Join(errs...)
}
