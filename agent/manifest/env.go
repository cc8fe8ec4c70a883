package manifest

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/staticpodd/staticpodd/agent/poddir"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// findVolume is the pod's volume named name, or nil.
func findVolume(pod *v1.Pod, name string) *v1.Volume {
	for i := range pod.Spec.Volumes {
		if pod.Spec.Volumes[i].Name == name {
			return &pod.Spec.Volumes[i]
		}
	}
	return nil
}

// containerEnv is the kubelet's makeEnvironmentVariables for a pod without a
// cluster: values are expanded against the variables defined before them;
// valueFrom reads the pod's fields and the container's resources. Service links
// are empty: there are no services. A fileKeyRef names its file in the
// pod's emptyDir, which the runtime reads when the container starts.
func containerEnv(pod *v1.Pod, c *v1.Container, p Paths, h Host) ([]podspec.EnvVar, error) {
	defined := map[string]string{}
	mapping := mappingFuncFor(defined)
	var out []podspec.EnvVar
	for _, e := range c.Env {
		value := e.Value
		var file *podspec.EnvFile
		switch {
		case value != "":
			value = expand(value, mapping)
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			v, err := podField(pod, e.ValueFrom.FieldRef.FieldPath)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			value = v
		case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
			v, err := resourceField(c, e.ValueFrom.ResourceFieldRef, h)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			value = v
		case e.ValueFrom != nil && e.ValueFrom.FileKeyRef != nil:
			f := e.ValueFrom.FileKeyRef
			vol := findVolume(pod, f.VolumeName)
			if vol == nil || vol.EmptyDir == nil {
				return nil, fmt.Errorf("env %s: cannot find the emptyDir volume %q referenced by fileKeyRef", e.Name, f.VolumeName)
			}
			file = &podspec.EnvFile{
				Dir:      poddir.Root(p.RootDir).EmptyDir(string(pod.UID), vol.Name),
				Path:     f.Path,
				Key:      f.Key,
				Optional: f.Optional != nil && *f.Optional,
			}
		case e.ValueFrom != nil:
			return nil, fmt.Errorf("env %s: static pods may not reference configmaps or secrets", e.Name)
		}
		if file != nil {
			// Unknown until the container starts: $(NAME) stays as written.
			delete(defined, e.Name)
		} else {
			defined[e.Name] = value
		}
		// A later definition of the same name replaces the earlier, in place.
		replaced := false
		for i := range out {
			if out[i].Name == e.Name {
				out[i].Value, out[i].File, replaced = value, file, true
			}
		}
		if !replaced {
			out = append(out, podspec.EnvVar{Name: e.Name, Value: value, File: file})
		}
	}
	return out, nil
}

// podField is the downward API's ExtractFieldPathAsString for the fields a static
// pod can use.
func podField(pod *v1.Pod, path string) (string, error) {
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.hostIP":
		return pod.Status.HostIP, nil
	case "status.podIPs":
		return joinIPs(pod.Status.PodIPs, pod.Status.PodIP), nil
	case "status.hostIPs":
		ips := make([]v1.PodIP, 0, len(pod.Status.HostIPs))
		for _, ip := range pod.Status.HostIPs {
			ips = append(ips, v1.PodIP(ip))
		}
		return joinIPs(ips, pod.Status.HostIP), nil
	}
	return "", fmt.Errorf("fieldRef %q is not supported", path)
}

func joinIPs(ips []v1.PodIP, single string) string {
	if len(ips) == 0 {
		return single
	}
	s := make([]string, len(ips))
	for i, ip := range ips {
		s[i] = ip.IP
	}
	return strings.Join(s, ",")
}

// subscript reads metadata.labels['key'].
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok || !strings.HasSuffix(rest, "']") {
		return "", false
	}
	return strings.TrimSuffix(rest, "']"), true
}

// resourceField is the kubelet's ExtractContainerResourceValue: the value divided
// by the divisor, rounded up. Without a limit, the node's capacity stands in for
// it, as the kubelet's node allocatable does.
func resourceField(c *v1.Container, ref *v1.ResourceFieldSelector, h Host) (string, error) {
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	kind, name, _ := strings.Cut(ref.Resource, ".")
	list := c.Resources.Limits
	if kind == "requests" {
		list = c.Resources.Requests
	}
	q, ok := list[v1.ResourceName(name)]
	switch name {
	case "cpu":
		milli := q.MilliValue()
		if !ok && kind == "limits" {
			milli = int64(h.CPUs) * 1000
		}
		return strconv.FormatInt(int64(math.Ceil(float64(milli)/float64(divisor.MilliValue()))), 10), nil
	case "memory", "ephemeral-storage":
		v := q.Value()
		if !ok && kind == "limits" && name == "memory" {
			v, _ = h.memoryCapacity() // 0 when unknown
		}
		return strconv.FormatInt(int64(math.Ceil(float64(v)/float64(divisor.Value()))), 10), nil
	}
	return "", fmt.Errorf("resourceFieldRef %q is not supported", ref.Resource)
}
