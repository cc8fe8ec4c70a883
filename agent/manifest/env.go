package manifest

import (
	"fmt"
	"maps"
	"math"
	"slices"
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
// cluster: envFrom's variables first, then env's, which replace them;
// values are expanded against the variables defined before them; valueFrom
// reads the pod's fields, the container's resources and the pod's
// ConfigMaps and Secrets (h.Objects). Service links are empty: there are no
// services. A fileKeyRef names its file in the pod's emptyDir, which the
// runtime reads when the container starts. A value from a Secret is marked
// Sensitive.
func containerEnv(pod *v1.Pod, c *v1.Container, p Paths, h Host) ([]podspec.EnvVar, error) {
	defined := map[string]string{}
	// sensitive are the defined variables that hold a Secret's value: one
	// whose value expands them holds it too.
	sensitive := map[string]bool{}
	usedSensitive := false
	lookup := mappingFuncFor(defined)
	mapping := func(name string) string {
		if _, ok := defined[name]; ok && sensitive[name] {
			usedSensitive = true
		}
		return lookup(name)
	}
	var out []podspec.EnvVar
	// set defines v; a later definition of the same name replaces the
	// earlier, in place.
	set := func(v podspec.EnvVar) {
		if v.File != nil {
			// Unknown until the container starts: $(NAME) stays as written.
			delete(defined, v.Name)
		} else {
			defined[v.Name] = v.Value
		}
		sensitive[v.Name] = v.Sensitive
		for i := range out {
			if out[i].Name == v.Name {
				out[i] = v
				return
			}
		}
		out = append(out, v)
	}
	for _, from := range c.EnvFrom {
		vars, err := envFrom(pod.Namespace, from, h.Objects)
		if err != nil {
			return nil, err
		}
		for _, v := range vars {
			set(v)
		}
	}
	for _, e := range c.Env {
		v := podspec.EnvVar{Name: e.Name, Value: e.Value}
		switch {
		case v.Value != "":
			usedSensitive = false
			v.Value = expand(v.Value, mapping)
			v.Sensitive = usedSensitive
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil:
			value, err := podField(pod, e.ValueFrom.FieldRef.FieldPath)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			v.Value = value
		case e.ValueFrom != nil && e.ValueFrom.ResourceFieldRef != nil:
			value, err := resourceField(c, e.ValueFrom.ResourceFieldRef, h)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			v.Value = value
		case e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			optional := ref.Optional != nil && *ref.Optional
			cm, err := LookupConfigMap(h.Objects, pod.Namespace, ref.Name)
			if err != nil {
				if optional {
					continue
				}
				return nil, err
			}
			value, ok := cm.Data[ref.Key]
			if !ok {
				if optional {
					continue
				}
				return nil, missingKey(ref.Key, "ConfigMap", pod.Namespace, ref.Name)
			}
			v.Value = value
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			optional := ref.Optional != nil && *ref.Optional
			s, err := LookupSecret(h.Objects, pod.Namespace, ref.Name)
			if err != nil {
				if optional {
					continue
				}
				return nil, err
			}
			value, ok := s.Data[ref.Key]
			if !ok {
				if optional {
					continue
				}
				return nil, missingKey(ref.Key, "Secret", pod.Namespace, ref.Name)
			}
			v.Value, v.Sensitive = string(value), true
		case e.ValueFrom != nil && e.ValueFrom.FileKeyRef != nil:
			f := e.ValueFrom.FileKeyRef
			vol := findVolume(pod, f.VolumeName)
			if vol == nil || vol.EmptyDir == nil {
				return nil, fmt.Errorf("env %s: cannot find the emptyDir volume %q referenced by fileKeyRef", e.Name, f.VolumeName)
			}
			v.File = &podspec.EnvFile{
				Dir:      poddir.Root(p.RootDir).EmptyDir(string(pod.UID), vol.Name),
				Path:     f.Path,
				Key:      f.Key,
				Optional: f.Optional != nil && *f.Optional,
			}
		}
		set(v)
	}
	return out, nil
}

// envFrom is the variables of one envFrom source, named with its prefix, in
// the order of their keys (the kubelet's come from a map: any order is
// its); nothing for a missing optional object. Every key becomes a
// variable, as with the kubelet (the API's relaxed variable names).
func envFrom(namespace string, from v1.EnvFromSource, objs Objects) ([]podspec.EnvVar, error) {
	var vars []podspec.EnvVar
	switch {
	case from.ConfigMapRef != nil:
		ref := from.ConfigMapRef
		cm, err := LookupConfigMap(objs, namespace, ref.Name)
		if err != nil {
			if ref.Optional != nil && *ref.Optional {
				return nil, nil
			}
			return nil, err
		}
		for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
			vars = append(vars, podspec.EnvVar{Name: from.Prefix + k, Value: cm.Data[k]})
		}
	case from.SecretRef != nil:
		ref := from.SecretRef
		s, err := LookupSecret(objs, namespace, ref.Name)
		if err != nil {
			if ref.Optional != nil && *ref.Optional {
				return nil, nil
			}
			return nil, err
		}
		for _, k := range slices.Sorted(maps.Keys(s.Data)) {
			vars = append(vars, podspec.EnvVar{Name: from.Prefix + k, Value: string(s.Data[k]), Sensitive: true})
		}
	}
	return vars, nil
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
