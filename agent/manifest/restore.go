package manifest

import (
	"encoding/json"

	v1 "k8s.io/api/core/v1"
)

// Annotations a container is started with so that it can be stopped as its
// spec says once its pod's manifest is gone (the kubelet's container
// annotations, restoreSpecsFromContainerLabels).
const (
	AnnotationPreStopHandler = "io.kubernetes.container.preStopHandler"
	AnnotationContainerPorts = "io.kubernetes.container.ports"
)

// stopAnnotations are what of c its stop needs: its preStop hook and, for a
// named port in it, its ports; nil if it has no preStop hook.
func stopAnnotations(c *v1.Container) map[string]string {
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return nil
	}
	a := map[string]string{}
	if b, err := json.Marshal(c.Lifecycle.PreStop); err == nil {
		a[AnnotationPreStopHandler] = string(b)
	}
	if len(c.Ports) > 0 {
		if b, err := json.Marshal(c.Ports); err == nil {
			a[AnnotationContainerPorts] = string(b)
		}
	}
	return a
}

// RestoreContainer is the part of container name's spec its annotations
// kept: its preStop hook and ports, as far as they can be read.
func RestoreContainer(name string, annotations map[string]string) v1.Container {
	c := v1.Container{Name: name}
	if s := annotations[AnnotationPreStopHandler]; s != "" {
		var h v1.LifecycleHandler
		if json.Unmarshal([]byte(s), &h) == nil {
			c.Lifecycle = &v1.Lifecycle{PreStop: &h}
		}
	}
	if s := annotations[AnnotationContainerPorts]; s != "" {
		var ports []v1.ContainerPort
		if json.Unmarshal([]byte(s), &ports) == nil {
			c.Ports = ports
		}
	}
	return c
}
