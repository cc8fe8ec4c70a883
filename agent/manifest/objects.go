package manifest

import (
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Objects is where a pod's ConfigMaps and Secrets are looked up (the
// agent's *objects.Set): nil when there is none of that name.
type Objects interface {
	ConfigMap(namespace, name string) *v1.ConfigMap
	Secret(namespace, name string) *v1.Secret
}

// NotFoundError is a ConfigMap or Secret the sources do not have, worded as
// the kubelet's configmap and secret managers' NotFound: `configmap "x" not
// found`.
type NotFoundError struct {
	Resource string // "configmap" or "secret"
	Name     string
}

func (e *NotFoundError) Error() string { return fmt.Sprintf("%s %q not found", e.Resource, e.Name) }

// IsNotFound reports whether err is, or wraps, a NotFoundError.
func IsNotFound(err error) bool {
	var nf *NotFoundError
	return errors.As(err, &nf)
}

// LookupConfigMap is the ConfigMap namespace/name of objs (nil: none), or a
// NotFoundError.
func LookupConfigMap(objs Objects, namespace, name string) (*v1.ConfigMap, error) {
	if objs != nil {
		if cm := objs.ConfigMap(namespace, name); cm != nil {
			return cm, nil
		}
	}
	return nil, &NotFoundError{Resource: "configmap", Name: name}
}

// LookupSecret is the Secret namespace/name of objs (nil: none), or a
// NotFoundError.
func LookupSecret(objs Objects, namespace, name string) (*v1.Secret, error) {
	if objs != nil {
		if s := objs.Secret(namespace, name); s != nil {
			return s, nil
		}
	}
	return nil, &NotFoundError{Resource: "secret", Name: name}
}
