package manifest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// AnnotationContainerHashes carries each container's hash from parsing to
// conversion: a JSON object from container name to hash. A manifest's own value
// for it is replaced.
const AnnotationContainerHashes = "staticpodd.io/container-hashes"

// ContainerHash identifies container c's desired definition; adoption and
// restarts on a manifest edit compare it.
//
// For a pod read from a manifest it is the hash taken at parse time of the
// container as written (see hashContainers), not of the decoded and defaulted
// v1.Container: a new field or default in k8s.io/api would otherwise change every
// hash on upgrade and restart every container, the trap the pod UID avoids
// (kubernetes#116080). A pod built in code, without the annotation, has no written
// form; its container is hashed as a v1.Container instead.
func ContainerHash(pod *v1.Pod, c *v1.Container) (string, error) {
	ann, ok := pod.Annotations[AnnotationContainerHashes]
	if !ok {
		js, err := json.Marshal(c)
		if err != nil {
			return "", fmt.Errorf("hash container %s: %w", c.Name, err)
		}
		doc, err := decodeGeneric(js)
		if err != nil {
			return "", fmt.Errorf("hash container %s: %w", c.Name, err)
		}
		return hashCanonical(doc, c.Name)
	}
	var hashes map[string]string
	if err := json.Unmarshal([]byte(ann), &hashes); err != nil {
		return "", fmt.Errorf("hash container %s: annotation %s: %w", c.Name, AnnotationContainerHashes, err)
	}
	h, ok := hashes[c.Name]
	if !ok {
		return "", fmt.Errorf("hash container %s: not in annotation %s", c.Name, AnnotationContainerHashes)
	}
	return h, nil
}

// hashContainers hashes every container and init container of a Pod document as
// written: the first 16 bytes of the SHA-256 of the container's generic JSON
// form encoded again (sorted keys, numbers as written), hex. Formatting, comments
// and key order do not change a hash; any change to the container's own fields
// does, and a change elsewhere in the pod does not. The result is the value of
// AnnotationContainerHashes.
func hashContainers(doc any, pod *v1.Pod) (string, error) {
	m, _ := doc.(map[string]any)
	spec, _ := m["spec"].(map[string]any)
	hashes := map[string]string{}
	for _, list := range []struct {
		key string
		cs  []v1.Container
	}{{"containers", pod.Spec.Containers}, {"initContainers", pod.Spec.InitContainers}} {
		raw, _ := spec[list.key].([]any)
		if len(raw) != len(list.cs) {
			return "", fmt.Errorf("hash containers: spec.%s has %d entries, decoded %d", list.key, len(raw), len(list.cs))
		}
		for i, c := range raw {
			h, err := hashCanonical(c, list.cs[i].Name)
			if err != nil {
				return "", err
			}
			hashes[list.cs[i].Name] = h
		}
	}
	js, err := json.Marshal(hashes)
	if err != nil {
		return "", fmt.Errorf("hash containers: %w", err)
	}
	return string(js), nil
}

func hashCanonical(doc any, name string) (string, error) {
	canonical, err := json.Marshal(doc)
	if err != nil {
		return "", fmt.Errorf("hash container %s: %w", name, err)
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:16]), nil
}
