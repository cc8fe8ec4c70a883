package manifest

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AnnotationStartAfter names, comma-separated, the static pods (their
// manifest's metadata.name, without the node suffix, in the pod's own
// namespace) that must be Ready before anything of the pod is made: its
// sandbox waits, and its containers with it.
const AnnotationStartAfter = "staticpodd.io/start-after"

// Bounds of a start-after list: each name is a pod name (a DNS-1123
// subdomain), and a pod waits for at most MaxStartAfter others, which is
// more than a control plane's chain (etcd, the API server, the
// controllers) needs.
const MaxStartAfter = 32

// StartAfterField is the field errors of the annotation name.
var StartAfterField = field.NewPath("metadata", "annotations").Key(AnnotationStartAfter)

// StartAfter is the list of pod names of pod's start-after annotation, as
// written; nil without one. A list the validator refuses (startAfter) never
// reaches a source's pods.
func StartAfter(pod *v1.Pod) []string {
	names, _ := parseStartAfter(pod.Annotations[AnnotationStartAfter])
	return names
}

// parseStartAfter splits a start-after value into names, each checked.
func parseStartAfter(value string) ([]string, []string) {
	if strings.TrimSpace(value) == "" {
		return nil, nil
	}
	var names, msgs []string
	// At most one more than allowed is split off: a hostile value of a
	// million commas costs no more than a valid one.
	parts := strings.SplitN(value, ",", MaxStartAfter+2)
	if len(parts) > MaxStartAfter {
		return nil, []string{fmt.Sprintf("names more than %d pods", MaxStartAfter)}
	}
	for _, part := range parts {
		name := strings.TrimSpace(part)
		if name == "" {
			msgs = append(msgs, "has an empty name: names are separated by single commas")
			continue
		}
		for _, m := range validation.IsDNS1123Subdomain(name) {
			msgs = append(msgs, fmt.Sprintf("%q: %s", shorten(name), m))
		}
		if slices.Contains(names, name) {
			msgs = append(msgs, fmt.Sprintf("names %q twice", name))
			continue
		}
		names = append(names, name)
	}
	if len(msgs) > 0 {
		return nil, msgs
	}
	return names, nil
}

// startAfter checks the annotation's syntax, one manifest at a time; what
// the names refer to is checked over the whole set (CheckOrder).
func (v *validator) startAfter(pod *v1.Pod, meta *field.Path) {
	value, ok := pod.Annotations[AnnotationStartAfter]
	if !ok {
		return
	}
	_, msgs := parseStartAfter(value)
	v.invalid(meta.Child("annotations").Key(AnnotationStartAfter), shorten(value), msgs)
}

// Order is the start order of a set of pods, keyed namespace/full name:
// After lists, for each pod that starts after others, their keys;
// Dependents is the reverse. Blocked are the pods that cannot start whatever
// happens (in a cycle, or naming a pod the set does not have), with why.
type Order struct {
	After      map[string][]string
	Dependents map[string][]string
	Blocked    map[string]*Error
}

// CheckOrder reads the start-after annotations of pods (keyed
// namespace/name, as the agent keys them; origin: where each came from)
// on node, whose suffix their names carry. Only the whole set tells a
// cycle or a name no manifest defines: a source's one file cannot.
func CheckOrder(pods map[string]Pod, node string) Order {
	o := Order{After: map[string][]string{}, Dependents: map[string][]string{}, Blocked: map[string]*Error{}}
	block := func(key, value, reason string) {
		if o.Blocked[key] == nil {
			o.Blocked[key] = &Error{Origin: pods[key].Origin, Field: StartAfterField.String(), Value: shorten(value), Reason: reason}
		}
	}
	for key, p := range pods {
		names := StartAfter(p.Pod)
		var unknown []string
		for _, name := range names {
			dep := p.Namespace + "/" + name + "-" + node
			if _, ok := pods[dep]; !ok {
				unknown = append(unknown, name)
				continue
			}
			o.After[key] = append(o.After[key], dep)
			o.Dependents[dep] = append(o.Dependents[dep], key)
		}
		if len(unknown) > 0 {
			block(key, p.Annotations[AnnotationStartAfter],
				fmt.Sprintf("no manifest defines pod %s in namespace %s: the pod does not start", listNames(unknown), p.Namespace))
		}
	}
	for _, cycle := range cycles(o.After) {
		names := make([]string, len(cycle))
		for i, k := range cycle {
			names[i] = strings.TrimSuffix(k[strings.IndexByte(k, '/')+1:], "-"+node)
		}
		for _, k := range cycle {
			block(k, pods[k].Annotations[AnnotationStartAfter],
				fmt.Sprintf("start-after makes a cycle (%s): none of its pods starts", listNames(append(names, names[0]))))
		}
	}
	return o
}

// listNames joins names for a message, at most 8 of them.
func listNames(names []string) string {
	const most = 8
	if len(names) > most {
		return strings.Join(names[:most], ", ") + fmt.Sprintf(" and %d more", len(names)-most)
	}
	return strings.Join(names, ", ")
}

// cycles returns the strongly connected components of after that hold a
// cycle (more than one pod, or one naming itself), each as one cycle's path
// through them where it is one ring, else the component sorted. Tarjan's
// algorithm, without recursion: a chain of 10,000 pods costs no stack.
func cycles(after map[string][]string) [][]string {
	keys := make([]string, 0, len(after))
	for k := range after {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	next := 0
	type frame struct {
		key string
		i   int // the next edge to follow
	}
	for _, root := range keys {
		if _, seen := index[root]; seen {
			continue
		}
		calls := []frame{{key: root}}
		index[root], low[root] = next, next
		next++
		stack = append(stack, root)
		onStack[root] = true
		for len(calls) > 0 {
			f := &calls[len(calls)-1]
			if f.i < len(after[f.key]) {
				w := after[f.key][f.i]
				f.i++
				if _, seen := index[w]; !seen {
					index[w], low[w] = next, next
					next++
					stack = append(stack, w)
					onStack[w] = true
					calls = append(calls, frame{key: w})
				} else if onStack[w] {
					low[f.key] = min(low[f.key], index[w])
				}
				continue
			}
			v := f.key
			calls = calls[:len(calls)-1]
			if len(calls) > 0 {
				parent := calls[len(calls)-1].key
				low[parent] = min(low[parent], low[v])
			}
			if low[v] != index[v] {
				continue
			}
			var comp []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 || slices.Contains(after[v], v) {
				out = append(out, ring(comp, after))
			}
		}
	}
	return out
}

// ring orders a component as the cycle it is when each of its pods names
// exactly one other of it (a -> b -> a); else it is returned sorted.
func ring(comp []string, after map[string][]string) []string {
	slices.Sort(comp)
	in := map[string]bool{}
	for _, k := range comp {
		in[k] = true
	}
	succ := map[string]string{}
	for _, k := range comp {
		for _, d := range after[k] {
			if in[d] {
				if _, dup := succ[k]; dup {
					return comp
				}
				succ[k] = d
			}
		}
	}
	path := []string{comp[0]}
	for k := succ[comp[0]]; k != comp[0]; k = succ[k] {
		if len(path) == len(comp) {
			return comp
		}
		path = append(path, k)
	}
	if len(path) != len(comp) {
		return comp
	}
	return path
}
