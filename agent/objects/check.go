package objects

import (
	"fmt"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Duplicate is an object defined twice: Dropped is the one not used, Kept
// the one that is (the first by origin, so that which one pods see does not
// depend on the order files were read in).
type Duplicate struct {
	Kept, Dropped *Object
}

func (d Duplicate) Error() string {
	return fmt.Sprintf("%s %s/%s is defined both in %s and in %s; using the one from %s",
		d.Kept.Kind(), d.Kept.Namespace(), d.Kept.Name(), d.Kept.Origin, d.Dropped.Origin, d.Kept.Origin)
}

// Merge makes the Set of objs, keeping the first by origin of objects of
// one kind and full name; the others are returned, sorted by origin.
func Merge(objs []*Object) (*Set, []Duplicate) {
	byKey := map[string][]*Object{}
	for _, o := range objs {
		byKey[o.Key()] = append(byKey[o.Key()], o)
	}
	kept := make([]*Object, 0, len(byKey))
	var dups []Duplicate
	for _, cands := range byKey {
		slices.SortStableFunc(cands, func(a, b *Object) int { return strings.Compare(a.Origin, b.Origin) })
		kept = append(kept, cands[0])
		for _, other := range cands[1:] {
			dups = append(dups, Duplicate{Kept: cands[0], Dropped: other})
		}
	}
	slices.SortStableFunc(dups, func(a, b Duplicate) int { return strings.Compare(a.Dropped.Origin, b.Dropped.Origin) })
	return NewSet(kept), dups
}

// Ref is one reference of a pod to a ConfigMap or a Secret, as the kubelet
// follows it: a volume (configMap, secret, or a projected volume's
// source), an env var's valueFrom, an envFrom, an imagePullSecret.
type Ref struct {
	Field    *field.Path // of the name
	Kind     string      // "ConfigMap" or "Secret"
	Name     string
	Keys     []string      // the keys it needs (items, a key ref); none: the whole object
	KeyPaths []*field.Path // where each key is written
	Optional bool
	// PullSecret: the kubelet pulls without a missing one, with a
	// warning (FailedToRetrieveImagePullSecret).
	PullSecret bool
}

// References are every ConfigMap and Secret pod refers to, in the order of
// the spec.
func References(pod *v1.Pod) []Ref {
	var refs []Ref
	spec := field.NewPath("spec")
	opt := func(b *bool) bool { return b != nil && *b }
	items := func(p *field.Path, list []v1.KeyToPath) ([]string, []*field.Path) {
		var keys []string
		var paths []*field.Path
		for i, it := range list {
			keys = append(keys, it.Key)
			paths = append(paths, p.Child("items").Index(i).Child("key"))
		}
		return keys, paths
	}
	for i, vol := range pod.Spec.Volumes {
		p := spec.Child("volumes").Index(i)
		switch {
		case vol.ConfigMap != nil:
			vp := p.Child("configMap")
			keys, paths := items(vp, vol.ConfigMap.Items)
			refs = append(refs, Ref{Field: vp.Child("name"), Kind: "ConfigMap", Name: vol.ConfigMap.Name, Keys: keys, KeyPaths: paths, Optional: opt(vol.ConfigMap.Optional)})
		case vol.Secret != nil:
			vp := p.Child("secret")
			keys, paths := items(vp, vol.Secret.Items)
			refs = append(refs, Ref{Field: vp.Child("secretName"), Kind: "Secret", Name: vol.Secret.SecretName, Keys: keys, KeyPaths: paths, Optional: opt(vol.Secret.Optional)})
		case vol.Projected != nil:
			for j, src := range vol.Projected.Sources {
				sp := p.Child("projected", "sources").Index(j)
				if src.ConfigMap != nil {
					vp := sp.Child("configMap")
					keys, paths := items(vp, src.ConfigMap.Items)
					refs = append(refs, Ref{Field: vp.Child("name"), Kind: "ConfigMap", Name: src.ConfigMap.Name, Keys: keys, KeyPaths: paths, Optional: opt(src.ConfigMap.Optional)})
				}
				if src.Secret != nil {
					vp := sp.Child("secret")
					keys, paths := items(vp, src.Secret.Items)
					refs = append(refs, Ref{Field: vp.Child("name"), Kind: "Secret", Name: src.Secret.Name, Keys: keys, KeyPaths: paths, Optional: opt(src.Secret.Optional)})
				}
			}
		}
	}
	containers := func(p *field.Path, cs []v1.Container) {
		for i, c := range cs {
			cp := p.Index(i)
			for j, e := range c.EnvFrom {
				ep := cp.Child("envFrom").Index(j)
				if e.ConfigMapRef != nil {
					refs = append(refs, Ref{Field: ep.Child("configMapRef", "name"), Kind: "ConfigMap", Name: e.ConfigMapRef.Name, Optional: opt(e.ConfigMapRef.Optional)})
				}
				if e.SecretRef != nil {
					refs = append(refs, Ref{Field: ep.Child("secretRef", "name"), Kind: "Secret", Name: e.SecretRef.Name, Optional: opt(e.SecretRef.Optional)})
				}
			}
			for j, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				ep := cp.Child("env").Index(j).Child("valueFrom")
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					rp := ep.Child("configMapKeyRef")
					refs = append(refs, Ref{Field: rp.Child("name"), Kind: "ConfigMap", Name: r.Name, Keys: []string{r.Key}, KeyPaths: []*field.Path{rp.Child("key")}, Optional: opt(r.Optional)})
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					rp := ep.Child("secretKeyRef")
					refs = append(refs, Ref{Field: rp.Child("name"), Kind: "Secret", Name: r.Name, Keys: []string{r.Key}, KeyPaths: []*field.Path{rp.Child("key")}, Optional: opt(r.Optional)})
				}
			}
		}
	}
	containers(spec.Child("initContainers"), pod.Spec.InitContainers)
	containers(spec.Child("containers"), pod.Spec.Containers)
	for i, s := range pod.Spec.ImagePullSecrets {
		refs = append(refs, Ref{Field: spec.Child("imagePullSecrets").Index(i).Child("name"), Kind: "Secret", Name: s.Name, PullSecret: true})
	}
	return refs
}

// has reports whether o has key, counting a Secret's keys taken from
// credentials (present once read).
func (o *Object) has(key string) bool {
	if o.ConfigMap != nil {
		_, inData := o.ConfigMap.Data[key]
		_, inBinary := o.ConfigMap.BinaryData[key]
		return inData || inBinary
	}
	_, inData := o.Secret.Data[key]
	_, inCreds := o.Credentials[key]
	return inData || inCreds
}

// CheckPod says what pod lacks of set, as the kubelet would find it when
// starting the pod: errors for what keeps it waiting (a non-optional object
// or key not there), warnings for what it does without (an imagePullSecret).
// Messages name the object as the kubelet's do (`configmap "x" not found`).
func CheckPod(pod *v1.Pod, set *Set) (errs, warnings field.ErrorList) {
	for _, r := range References(pod) {
		o := set.Get(Key(r.Kind, pod.Namespace, r.Name))
		if o == nil {
			msg := fmt.Sprintf("%s %q not found in namespace %s", strings.ToLower(r.Kind), r.Name, pod.Namespace)
			e := field.NotFound(r.Field, r.Name)
			e.Detail = msg
			switch {
			case r.PullSecret:
				e.Detail += "; its images are pulled with the node's credentials only"
				warnings = append(warnings, e)
			case !r.Optional:
				errs = append(errs, e)
			}
			continue
		}
		if r.Optional {
			continue // a missing key of an optional object is left out
		}
		for i, key := range r.Keys {
			if !o.has(key) {
				e := field.NotFound(r.KeyPaths[i], key)
				e.Detail = fmt.Sprintf("couldn't find key %s in %s %s/%s", key, r.Kind, pod.Namespace, r.Name)
				errs = append(errs, e)
			}
		}
	}
	return errs, warnings
}

// Issue is something CheckAll found, of the file or URL Origin: at Field
// ("" for a whole object), an error unless Warning.
type Issue struct {
	Origin, Field, Reason string
	Warning               bool
}

// PodOf is a pod and the file or URL it came from.
type PodOf struct {
	Origin string
	Pod    *v1.Pod
}

// CheckAll checks pods with objs, the objects of the same manifests, as the
// daemon would use them together (`staticpodd validate`): an object
// defined twice, each Secret's credentials read with read (nil: not
// checked, which a warning says), each pod's references (CheckPod). A
// Secret whose credentials cannot be read stays in the set: its pods'
// references are checked as if it were whole, its own error said once.
func CheckAll(pods []PodOf, objs []*Object, read func(name string, limit int64) ([]byte, error)) []Issue {
	var out []Issue
	set, dups := Merge(objs)
	for _, d := range dups {
		out = append(out, Issue{Origin: d.Dropped.Origin, Field: "metadata.name", Reason: d.Error()})
	}
	for _, o := range objs {
		if o.Secret == nil || len(o.Credentials) == 0 {
			continue
		}
		if read == nil {
			out = append(out, Issue{Origin: o.Origin, Warning: true, Field: "metadata.annotations[" + AnnotationCredentials + "]",
				Reason: fmt.Sprintf("Secret %s/%s: credentials not checked: no credentials directory given", o.Namespace(), o.Name())})
			continue
		}
		if _, err := Fill(o, read); err != nil {
			out = append(out, Issue{Origin: o.Origin, Field: "metadata.annotations[" + AnnotationCredentials + "]", Reason: err.Error()})
		}
	}
	for _, p := range pods {
		errs, warnings := CheckPod(p.Pod, set)
		for _, e := range errs {
			out = append(out, Issue{Origin: p.Origin, Field: e.Field, Reason: e.ErrorBody()})
		}
		for _, e := range warnings {
			out = append(out, Issue{Origin: p.Origin, Field: e.Field, Reason: e.ErrorBody(), Warning: true})
		}
	}
	return out
}
