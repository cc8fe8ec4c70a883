package main

import (
	"fmt"
	"io"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// defaultContainerAnnotation names the container kubectl picks when none is
// given.
const defaultContainerAnnotation = "kubectl.kubernetes.io/default-container"

// defaultContainer is the container kubectl logs and exec pick when -c is not
// given (kubectl's podcmd.FindOrDefaultContainerByName): the one the
// annotation names, else the first, with a note on warn when there was a
// choice.
func defaultContainer(pod *v1.Pod, warn io.Writer) string {
	if name := pod.Annotations[defaultContainerAnnotation]; name != "" {
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
		fmt.Fprintf(warn, "Defaulted container %q out of: %s\n", name, allContainerNames(pod))
	}
	return name
}

// allContainerNames is kubectl's podcmd.AllContainerNames.
func allContainerNames(pod *v1.Pod) string {
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
