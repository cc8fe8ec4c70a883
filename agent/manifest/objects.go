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

// MissingError is what a pod needs of its ConfigMaps and Secrets that the
// sources do not have (yet): the object, worded as the kubelet's configmap
// and secret managers' NotFound (`configmap "x" not found`), or a key of
// it, as makeEnvironmentVariables words it. The pod waits for it.
type MissingError struct{ msg string }

func (e *MissingError) Error() string { return e.msg }

// IsMissing reports whether err is, or wraps, a MissingError.
func IsMissing(err error) bool {
	var m *MissingError
	return errors.As(err, &m)
}

func notFound(resource, name string) error {
	return &MissingError{fmt.Sprintf("%s %q not found", resource, name)}
}

// missingKey is a key the ConfigMap or Secret (kind) namespace/name lacks.
func missingKey(key, kind, namespace, name string) error {
	return &MissingError{fmt.Sprintf("couldn't find key %s in %s %s/%s", key, kind, namespace, name)}
}

// LookupConfigMap is the ConfigMap namespace/name of objs (nil: none), or a
// MissingError.
func LookupConfigMap(objs Objects, namespace, name string) (*v1.ConfigMap, error) {
	if objs != nil {
		if cm := objs.ConfigMap(namespace, name); cm != nil {
			return cm, nil
		}
	}
	return nil, notFound("configmap", name)
}

// LookupSecret is the Secret namespace/name of objs (nil: none), or a
// MissingError.
func LookupSecret(objs Objects, namespace, name string) (*v1.Secret, error) {
	if objs != nil {
		if s := objs.Secret(namespace, name); s != nil {
			return s, nil
		}
	}
	return nil, notFound("secret", name)
}
