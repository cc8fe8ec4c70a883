package manifest

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// downwardAPIFieldPaths are the fields a downwardAPI volume item may name
// (the API's validDownwardAPIFieldPathExpressions), besides the
// metadata.labels['key'] and metadata.annotations['key'] subscripts.
var downwardAPIFieldPaths = []string{
	"metadata.name", "metadata.namespace", "metadata.uid", "metadata.labels", "metadata.annotations",
}

// DownwardAPIValue is the value of a downwardAPI volume's item, as the
// kubelet's downwardapi CollectData reads it: a field of the pod
// (metadata.labels and metadata.annotations as key="value" lines) or a
// container's resource. Where it goes on the host is agent/volumes'.
func DownwardAPIValue(pod *v1.Pod, it *v1.DownwardAPIVolumeFile, h Host) (string, error) {
	switch {
	case it.FieldRef != nil:
		switch it.FieldRef.FieldPath {
		case "metadata.labels":
			return formatMap(pod.Labels), nil
		case "metadata.annotations":
			return formatMap(pod.Annotations), nil
		}
		return podField(pod, it.FieldRef.FieldPath)
	case it.ResourceFieldRef != nil:
		c := findContainer(pod, it.ResourceFieldRef.ContainerName)
		if c == nil {
			return "", fmt.Errorf("resourceFieldRef: no container %q", it.ResourceFieldRef.ContainerName)
		}
		return resourceField(c, it.ResourceFieldRef, h)
	}
	return "", errors.New("neither fieldRef nor resourceFieldRef")
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
