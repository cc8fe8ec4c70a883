// Package describe shows pods to a person, as the CLI prints them: picked by
// the names a user gives (Select), as JSON or YAML (Encode), and one pod
// described, kubectl describe's way (Pod). It is pure: the CLI asks the
// daemon, this package only formats, with the control characters of what
// containers decide (messages, probe output) escaped.
package describe

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// Matches says whether the user's name names p: its name, or its manifest's
// (the name without the node's suffix), each optionally namespace/.
func Matches(p v1.Pod, name string) bool {
	if ns, n, ok := strings.Cut(name, "/"); ok {
		if ns != p.Namespace {
			return false
		}
		name = n
	}
	return p.Name == name || (p.Spec.NodeName != "" && p.Name == name+"-"+p.Spec.NodeName)
}

// Find is the one pod name names (as Matches) in namespace, or in any when
// namespace is "". During an edit the old generation is listed, Terminating,
// beside the new one: the new one is the pod.
func Find(pods []v1.Pod, name, namespace string) (*v1.Pod, error) {
	var found []v1.Pod
	for _, p := range pods {
		if (namespace == "" || p.Namespace == namespace) && Matches(p, name) {
			found = append(found, p)
		}
	}
	if live := slices.DeleteFunc(slices.Clone(found), func(p v1.Pod) bool { return p.DeletionTimestamp != nil }); len(live) > 0 {
		found = live
	}
	switch len(found) {
	case 0:
		return nil, fmt.Errorf("no pod %q", name)
	case 1:
		return &found[0], nil
	}
	return nil, fmt.Errorf("pod name %q is in several namespaces: choose one with -n", name)
}

// Select keeps the pods that names name, in the list's order; a name that
// matches none is an error, as kubectl get's NotFound.
func Select(pods []v1.Pod, names []string) ([]v1.Pod, error) {
	var out []v1.Pod
	used := make([]bool, len(names))
	for _, p := range pods {
		picked := false
		for i, n := range names {
			if Matches(p, n) {
				used[i], picked = true, true
			}
		}
		if picked {
			out = append(out, p)
		}
	}
	var missing []string
	for i, n := range names {
		if !used[i] {
			missing = append(missing, fmt.Sprintf("%q", n))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no pod %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// In reports whether namespace/name is one of pods: what ps POD... keeps of
// the lines about pods (failing probes, pod networks).
func In(pods []v1.Pod) func(namespace, name string) bool {
	set := make(map[string]bool, len(pods))
	for _, p := range pods {
		set[p.Namespace+"/"+p.Name] = true
	}
	return func(namespace, name string) bool { return set[namespace+"/"+name] }
}

// Encode writes list as format, "json" (indented, as kubectl -o json) or
// "yaml".
func Encode(w io.Writer, list *v1.PodList, format string) error {
	var b []byte
	var err error
	switch format {
	case "json":
		if b, err = json.MarshalIndent(list, "", "    "); err == nil {
			b = append(b, '\n')
		}
	case "yaml":
		b, err = yaml.Marshal(list)
	default:
		return fmt.Errorf("unknown output format %q", format)
	}
	if err != nil {
		return fmt.Errorf("encode the pods: %w", err)
	}
	_, err = w.Write(b)
	return err
}
