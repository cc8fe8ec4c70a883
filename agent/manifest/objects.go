package manifest

import v1 "k8s.io/api/core/v1"

// Objects is where a pod's ConfigMaps and Secrets are looked up (the
// agent's *objects.Set): nil when there is none of that name.
type Objects interface {
	ConfigMap(namespace, name string) *v1.ConfigMap
	Secret(namespace, name string) *v1.Secret
}
