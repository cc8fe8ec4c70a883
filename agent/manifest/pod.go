// Package manifest reads static Pod manifests the way the kubelet does: YAML or
// JSON, one Pod per file (or a Pod or PodList from a URL), named <name>-<node>,
// with a UID and the kubernetes.io/config.* annotations, validated; and
// converts a pod into what the runtime takes (agent/podspec).
//
// It is pure: it touches neither files nor the kernel (tests/deps_test.go,
// purePackages). What a conversion needs of the host comes in as values
// (Host, ResolvConf), read by the agent; agent/volumes makes on the host
// what a pod's volumes need, in the directories agent/poddir names.
package manifest

import (
	v1 "k8s.io/api/core/v1"
)

// Source kinds, as in the kubernetes.io/config.source annotation.
const (
	SourceFile = "file"
	SourceHTTP = "http"
	// SourceBundle is the pods of the signed bundle the node runs: read as
	// a directory's files are (several documents, ConfigMaps and Secrets
	// beside the pod, the NoExecute toleration), from an origin that names
	// the bundle and the file ("bundle NAME/FILE") rather than a path, so
	// that a pod keeps its UID from one bundle to the next when its
	// manifest does not change.
	SourceBundle = "bundle"
)

// Pod is one static pod as a source delivers it.
type Pod struct {
	*v1.Pod // named, UID'd, annotated, defaulted, validated

	Source string // SourceFile, SourceHTTP or SourceBundle
	Origin string // the file path, the URL or "bundle NAME/FILE" it came from
	// Recreated, when it grows, says the manifest was removed and written
	// again since: the pod is stopped and started again, same UID, as
	// the kubelet does for a REMOVE then ADD. Zero for a manifest never
	// recreated.
	Recreated uint64
}

// Problem is a manifest that could not be used, with why. When the same origin
// produced a good pod before, that last good pod is still in the update's Pods.
type Problem struct {
	Origin string
	Err    error
	// Fetch: the manifests could not be fetched (a URL's request failed),
	// rather than read and found invalid.
	Fetch bool
	// Warning: the manifest is used all the same (an unknown field, such as
	// a misspelt comand:, ignored), but it does not say what its author
	// meant; shown with the problems and recorded as an event, never
	// counted as a manifest that cannot be used.
	Warning bool
}
