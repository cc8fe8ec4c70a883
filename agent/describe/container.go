package describe

import (
	"fmt"
	"io"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// DefaultContainerAnnotation names the container kubectl picks when none is
// given.
const DefaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

// DefaultContainer is the container kubectl logs and exec pick when -c is not
// given (kubectl's podcmd.FindOrDefaultContainerByName): the one the
// annotation names, else the first, with a note on warn when there was a
// choice.
func DefaultContainer(pod *v1.Pod, warn io.Writer) string {
	if name := pod.Annotations[DefaultContainerAnnotation]; name != "" {
		for _, c := range pod.Spec.Containers {
			if c.Name == name {
				return name
			}
		}
	}
	if len(pod.Spec.Containers) == 0 {
		return ""
	}
	name := pod.Spec.Containers[0].Name
	if len(pod.Spec.Containers) > 1 || len(pod.Spec.InitContainers) > 0 || len(pod.Spec.EphemeralContainers) > 0 {
		fmt.Fprintf(warn, "Defaulted container %q out of: %s\n", name, AllContainerNames(pod))
	}
	return name
}

// AllContainerNames is kubectl's podcmd.AllContainerNames.
func AllContainerNames(pod *v1.Pod) string {
	var names []string
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		names = append(names, c.Name+" (ephem)")
	}
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name+" (init)")
	}
	return strings.Join(names, ", ")
}

// ExecContainer is the container an exec or a debug in pod runs in: the one
// named, else the default (DefaultContainer), with kubectl's note when it
// chose the first of several (podcmd.FindOrDefaultContainerByName).
func ExecContainer(pod *v1.Pod, name string) (container, note string, err error) {
	if name != "" {
		for _, c := range append(pod.Spec.Containers, pod.Spec.InitContainers...) {
			if c.Name == name {
				return name, "", nil
			}
		}
		return "", "", fmt.Errorf("pod %s has no container %q; it has %s", pod.Name, name, AllContainerNames(pod))
	}
	var warn strings.Builder
	if container = DefaultContainer(pod, &warn); container == "" {
		return "", "", fmt.Errorf("pod %s has no containers", pod.Name)
	}
	return container, strings.TrimSuffix(warn.String(), "\n"), nil
}
