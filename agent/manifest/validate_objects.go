package manifest

import (
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The checks of the fields that name a pod's ConfigMaps and Secrets, as the
// API server's (pkg/apis/core/validation): validateConfigMapVolumeSource,
// validateSecretVolumeSource, validateProjectedVolumeSource,
// ValidateEnvFrom and the key selectors. Whether the objects are there is
// not checked here: a missing one keeps the pod waiting, as with the kubelet.

const fileModeErrorMsg = "must be a number between 0 and 0777 (octal), both inclusive"

// mode checks a file mode of a volume's files.
func (v *validator) mode(p *field.Path, m *int32) {
	if m != nil && (*m > 0o777 || *m < 0) {
		v.add(field.Invalid(p, *m, fileModeErrorMsg))
	}
}

// keyToPaths checks a volume's items (validateKeyToPath); with paths, the
// paths of a projected volume's sources so far, a path used twice is an
// error (named in the volume's field, as the API's).
func (v *validator) keyToPaths(p *field.Path, items []v1.KeyToPath, paths *projectedPaths) {
	for i, kp := range items {
		ip := p.Index(i)
		if kp.Key == "" {
			v.add(field.Required(ip.Child("key"), ""))
		}
		if kp.Path == "" {
			v.add(field.Required(ip.Child("path"), ""))
		}
		v.localNonReserved(ip.Child("path"), kp.Path)
		v.mode(ip.Child("mode"), kp.Mode)
		if paths != nil && kp.Path != "" {
			paths.add(kp.Path)
		}
	}
}

// projectedPaths finds a path two sources of a projected volume both write.
type projectedPaths struct {
	v    *validator
	p    *field.Path // the volume's
	seen sets.Set[string]
}

func (pp *projectedPaths) add(path string) {
	if pp.seen.Has(path) {
		pp.v.add(field.Invalid(pp.p, path, "conflicting duplicate paths"))
	}
	pp.seen.Insert(path)
}

// localNonReserved is the API's ValidateLocalNonReservedPath: relative,
// without '..', not starting with "..".
func (v *validator) localNonReserved(p *field.Path, s string) {
	if s == "" {
		return
	}
	v.relative(p, s)
	if strings.HasPrefix(s, "..") && !strings.HasPrefix(s, "../") {
		v.add(field.Invalid(p, s, "must not start with '..'"))
	}
}

// projected checks a projected volume: configMap, secret and downwardAPI
// sources. A service account token, a cluster trust bundle and a pod
// certificate are made by the API server, which a static pod does not have.
func (v *validator) projected(p *field.Path, pv *v1.ProjectedVolumeSource) {
	v.mode(p.Child("defaultMode"), pv.DefaultMode)
	paths := &projectedPaths{v: v, p: p, seen: sets.New[string]()}
	for i, src := range pv.Sources {
		sp := p.Child("sources").Index(i)
		n := 0
		if src.ConfigMap != nil {
			n++
			if src.ConfigMap.Name == "" {
				v.add(field.Required(sp.Child("configMap", "name"), ""))
			}
			v.keyToPaths(sp.Child("configMap", "items"), src.ConfigMap.Items, paths)
		}
		if src.Secret != nil {
			n++
			if src.Secret.Name == "" {
				v.add(field.Required(sp.Child("secret", "name"), ""))
			}
			v.keyToPaths(sp.Child("secret", "items"), src.Secret.Items, paths)
		}
		if src.DownwardAPI != nil {
			n++
			v.downwardAPI(sp.Child("downwardAPI"), &v1.DownwardAPIVolumeSource{Items: src.DownwardAPI.Items})
			for _, it := range src.DownwardAPI.Items {
				if it.Path != "" {
					paths.add(it.Path)
				}
			}
		}
		if src.ServiceAccountToken != nil {
			n++
			v.add(field.Forbidden(sp.Child("serviceAccountToken"), "static pods may not use service account tokens: they are issued by the API server"))
		}
		if src.ClusterTrustBundle != nil {
			n++
			v.add(field.Forbidden(sp.Child("clusterTrustBundle"), "static pods may not use ClusterTrustBundles: they are objects of the API server"))
		}
		if src.PodCertificate != nil {
			n++
			v.add(field.Forbidden(sp.Child("podCertificate"), "static pods may not use pod certificates: they are issued through the API server"))
		}
		if n > 1 {
			v.add(field.Forbidden(sp, "may not specify more than 1 volume type per source"))
		}
	}
}

// envFrom checks a container's envFrom (ValidateEnvFrom, relaxed variable
// names as the API's RelaxedEnvironmentVariableValidation).
func (v *validator) envFrom(p *field.Path, from []v1.EnvFromSource) {
	for i, ef := range from {
		ip := p.Index(i)
		if ef.Prefix != "" {
			v.invalid(ip.Child("prefix"), ef.Prefix, validation.IsRelaxedEnvVarName(ef.Prefix))
		}
		n := 0
		if ef.ConfigMapRef != nil {
			n++
			v.objectName(ip.Child("configMapRef", "name"), ef.ConfigMapRef.Name)
		}
		if ef.SecretRef != nil {
			n++
			v.objectName(ip.Child("secretRef", "name"), ef.SecretRef.Name)
		}
		switch {
		case n == 0:
			v.add(field.Invalid(p, "", "must specify one of: `configMapRef` or `secretRef`"))
		case n > 1:
			v.add(field.Invalid(p, "", "may not have more than one field specified at a time"))
		}
	}
}

// objectName checks the name of a ConfigMap or Secret an envFrom names.
func (v *validator) objectName(p *field.Path, name string) {
	if name == "" {
		v.add(field.Required(p, ""))
		return
	}
	v.invalid(p, name, validation.IsDNS1123Subdomain(name))
}

// keySelector checks a configMapKeyRef or secretKeyRef.
func (v *validator) keySelector(p *field.Path, name, key string) {
	v.invalid(p.Child("name"), name, validation.IsDNS1123Subdomain(name))
	if key == "" {
		v.add(field.Required(p.Child("key"), ""))
	} else {
		v.invalid(p.Child("key"), key, validation.IsConfigMapKey(key))
	}
}
