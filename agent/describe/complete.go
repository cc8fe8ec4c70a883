package describe

import (
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// PodCompletions are the names a pod argument completes to from prefix: each
// pod's name as its manifest gives it (without the node's suffix) and in
// full, each once, sorted.
func PodCompletions(pods []v1.Pod, prefix string) []string {
	var out []string
	for _, p := range pods {
		names := []string{p.Name}
		if short, ok := strings.CutSuffix(p.Name, "-"+p.Spec.NodeName); ok && p.Spec.NodeName != "" {
			names = append(names, short)
		}
		for _, n := range names {
			if strings.HasPrefix(n, prefix) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ImageCompletions are the references an image argument completes to from
// prefix: each stored reference, and Docker Hub's official images also as
// they are usually written (busybox:latest for
// docker.io/library/busybox:latest), each once, sorted.
func ImageCompletions(refs []string, prefix string) []string {
	var out []string
	for _, r := range refs {
		names := []string{r}
		if short, ok := strings.CutPrefix(r, "docker.io/library/"); ok {
			names = append(names, short)
		}
		for _, n := range names {
			if strings.HasPrefix(n, prefix) {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
