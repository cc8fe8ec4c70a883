// Package objects holds the ConfigMaps and Secrets that manifest sources
// give beside their pods (kind ConfigMap and kind Secret, v1), which static
// pods use as the kubelet's pods use the API server's: configMap, secret and
// projected volumes, env valueFrom and envFrom, imagePullSecrets. It decides
// from values alone (no host access): reading a credential is the caller's.
package objects

import (
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationCredentials, on a Secret, names the keys whose values are read
// from credentials of staticpodd's unit ($CREDENTIALS_DIRECTORY/NAME):
// comma-separated key=credential-name pairs.
const AnnotationCredentials = "staticpodd.io/credentials"

// Object is one ConfigMap or Secret as a manifest source gave it: exactly
// one of ConfigMap and Secret is set.
type Object struct {
	Source string // manifest.SourceFile or manifest.SourceHTTP
	Origin string // the file path or the URL it came from

	ConfigMap *v1.ConfigMap
	// Secret has stringData merged into data, as the API server stores it,
	// and, once its credentials are filled, their values under their keys.
	Secret *v1.Secret
	// Credentials maps a Secret's key to the name of the credential its
	// value is read from (AnnotationCredentials); nil for a ConfigMap.
	Credentials map[string]string
}

// Kind is "ConfigMap" or "Secret".
func (o *Object) Kind() string {
	if o.Secret != nil {
		return "Secret"
	}
	return "ConfigMap"
}

// Namespace and Name are the object's.
func (o *Object) Namespace() string { return o.meta().Namespace }
func (o *Object) Name() string      { return o.meta().Name }

func (o *Object) meta() *metav1.ObjectMeta {
	if o.Secret != nil {
		return &o.Secret.ObjectMeta
	}
	return &o.ConfigMap.ObjectMeta
}

// Key names the object among all others: Kind/namespace/name.
func (o *Object) Key() string { return Key(o.Kind(), o.Namespace(), o.Name()) }

// Key is the key of the object of kind ("ConfigMap" or "Secret") named
// namespace/name.
func Key(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

// Set is every object the sources have now, one per key; it is not changed
// once made, so it can be shared without a lock (a new Set replaces it).
type Set struct {
	byKey map[string]*Object
}

// NewSet makes a Set of objs, which must have distinct keys (the caller has
// settled duplicates).
func NewSet(objs []*Object) *Set {
	s := &Set{byKey: make(map[string]*Object, len(objs))}
	for _, o := range objs {
		s.byKey[o.Key()] = o
	}
	return s
}

// Get is the object of that key, or nil. A nil Set has none.
func (s *Set) Get(key string) *Object {
	if s == nil {
		return nil
	}
	return s.byKey[key]
}

// ConfigMap is the ConfigMap namespace/name, or nil.
func (s *Set) ConfigMap(namespace, name string) *v1.ConfigMap {
	if o := s.Get(Key("ConfigMap", namespace, name)); o != nil {
		return o.ConfigMap
	}
	return nil
}

// Secret is the Secret namespace/name, or nil.
func (s *Set) Secret(namespace, name string) *v1.Secret {
	if o := s.Get(Key("Secret", namespace, name)); o != nil {
		return o.Secret
	}
	return nil
}

// Len is how many objects s has.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.byKey)
}
