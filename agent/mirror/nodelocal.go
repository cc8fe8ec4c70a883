package mirror

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// AnnotationNodeLocalObjects is set on a mirror pod whose static pod uses
// ConfigMaps or Secrets of the node's manifests: one line per reference the
// mirror pod had to leave out, saying what it was. kubectl describe prints a
// multi-line annotation a line at a time.
const AnnotationNodeLocalObjects = "staticpodd.io/node-local-objects"

// maxNodeLocalAnnotation bounds that annotation: far below the API server's
// 256 KiB for all of a pod's annotations, which the manifest's own share.
const maxNodeLocalAnnotation = 8 << 10

// withoutNodeLocalObjects takes out of mp, a mirror pod being made, every
// reference to a ConfigMap or a Secret, and records them in
// AnnotationNodeLocalObjects.
//
// The API server refuses a mirror pod that names a Secret (the
// ServiceAccount admission plugin's mirror pod rule) or any API object
// (NodeRestriction, podutil.HasAPIObjectReference), and these objects are
// not the API server's anyway: they live in the node's manifests. So:
//   - a configMap, secret or projected volume (one with a configMap or
//     secret source) becomes an emptyDir of the same name, so that every
//     volumeMount still names a volume; its medium is the one the kubelet's
//     volume plugin wraps (pkg/volume/{configmap,secret,projected}
//     wrappedVolumeSpec): the node's disk for a configMap, memory for a
//     secret or projected volume;
//   - env entries from a configMapKeyRef or secretKeyRef, envFrom entries
//     and imagePullSecrets are removed.
//
// A serviceAccountName or a serviceAccountToken projection never gets here:
// the manifest's validation refuses them. Only the spec the API server sees
// changes; the mirror pod's hash annotation is the static pod's, so the
// mirror pod is current as before.
func withoutNodeLocalObjects(mp *v1.Pod) {
	delete(mp.Annotations, AnnotationNodeLocalObjects)
	var lines []string
	s := &mp.Spec
	for i := range s.Volumes {
		if line, ok := rewriteVolume(&s.Volumes[i]); ok {
			lines = append(lines, line)
		}
	}
	for _, cs := range [][]v1.Container{s.InitContainers, s.Containers} {
		for i := range cs {
			lines = append(lines, rewriteEnv(&cs[i])...)
		}
	}
	if len(s.ImagePullSecrets) > 0 {
		refs := make([]string, len(s.ImagePullSecrets))
		for i, r := range s.ImagePullSecrets {
			refs[i] = ref("secret", r.Name)
		}
		lines = append(lines, "imagePullSecrets: "+strings.Join(refs, ", "))
		s.ImagePullSecrets = nil
	}
	if len(lines) == 0 {
		return
	}
	if mp.Annotations == nil {
		mp.Annotations = map[string]string{}
	}
	mp.Annotations[AnnotationNodeLocalObjects] = bounded(lines, maxNodeLocalAnnotation)
}

// rewriteVolume replaces a volume that uses a ConfigMap or Secret by an
// emptyDir; the line says what it was.
func rewriteVolume(v *v1.Volume) (string, bool) {
	var refs []string
	medium := v1.StorageMediumMemory
	switch {
	case v.ConfigMap != nil:
		refs = []string{ref("configMap", v.ConfigMap.Name) + optional(v.ConfigMap.Optional)}
		medium = v1.StorageMediumDefault
	case v.Secret != nil:
		refs = []string{ref("secret", v.Secret.SecretName) + optional(v.Secret.Optional)}
	case v.Projected != nil:
		local := false
		for _, src := range v.Projected.Sources {
			switch {
			case src.ConfigMap != nil:
				refs = append(refs, ref("configMap", src.ConfigMap.Name)+optional(src.ConfigMap.Optional))
				local = true
			case src.Secret != nil:
				refs = append(refs, ref("secret", src.Secret.Name)+optional(src.Secret.Optional))
				local = true
			case src.DownwardAPI != nil:
				// Lost with the volume: said so, though the API server
				// would take it.
				refs = append(refs, "downwardAPI")
			}
		}
		if !local {
			// Only downwardAPI: the API server takes it as it is.
			return "", false
		}
		refs[0] = "projected " + refs[0]
	default:
		return "", false
	}
	v.VolumeSource = v1.VolumeSource{EmptyDir: &v1.EmptyDirVolumeSource{Medium: medium}}
	return "volume " + quote(v.Name) + ": " + strings.Join(refs, ", "), true
}

// rewriteEnv removes c's variables taken from ConfigMaps and Secrets and
// its envFrom; a line each.
func rewriteEnv(c *v1.Container) []string {
	var lines []string
	kept := c.Env[:0]
	for _, e := range c.Env {
		var what string
		if vf := e.ValueFrom; vf != nil {
			switch {
			case vf.ConfigMapKeyRef != nil:
				what = ref("configMap", vf.ConfigMapKeyRef.Name) + " key " + quote(vf.ConfigMapKeyRef.Key) + optional(vf.ConfigMapKeyRef.Optional)
			case vf.SecretKeyRef != nil:
				what = ref("secret", vf.SecretKeyRef.Name) + " key " + quote(vf.SecretKeyRef.Key) + optional(vf.SecretKeyRef.Optional)
			}
		}
		if what == "" {
			kept = append(kept, e)
			continue
		}
		lines = append(lines, "env "+quote(c.Name)+" "+quote(e.Name)+": "+what)
	}
	c.Env = kept
	if len(c.Env) == 0 {
		c.Env = nil
	}
	for _, e := range c.EnvFrom {
		var what string
		switch {
		case e.ConfigMapRef != nil:
			what = ref("configMap", e.ConfigMapRef.Name) + optional(e.ConfigMapRef.Optional)
		case e.SecretRef != nil:
			what = ref("secret", e.SecretRef.Name) + optional(e.SecretRef.Optional)
		default:
			continue
		}
		if e.Prefix != "" {
			what += " prefix " + quote(e.Prefix)
		}
		lines = append(lines, "envFrom "+quote(c.Name)+": "+what)
	}
	// Every source envFrom has names an object.
	c.EnvFrom = nil
	return lines
}

func ref(kind, name string) string { return kind + " " + quote(name) }

func optional(o *bool) string {
	if o != nil && *o {
		return " (optional)"
	}
	return ""
}

// quote leaves a name as it is when it is plain (what object names, keys
// and container names are), and quotes any other (an environment
// variable's name may hold spaces, colons or quotes), so that no name can
// forge a line or a field.
func quote(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return strconv.Quote(s)
		}
	}
	if s == "" {
		return `""`
	}
	return s
}

// bounded joins lines with newlines in at most max bytes, leaving out the
// lines that do not fit and saying how many.
func bounded(lines []string, max int) string {
	const noteRoom = 32 // for "and N more"
	var b strings.Builder
	for i, line := range lines {
		if b.Len()+1+len(line) > max-noteRoom {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			fmt.Fprintf(&b, "and %d more", len(lines)-i)
			return b.String()
		}
		if b.Len() > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(line)
	}
	return b.String()
}
