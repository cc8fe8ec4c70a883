package manifest

import (
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"
)

// AnnotationRestartedAt is the annotation kubectl rollout restart sets on a
// pod template; staticpodd restart sets it on the pod it makes a new
// generation of, so that users see why the pod's UID changed.
const AnnotationRestartedAt = "kubectl.kubernetes.io/restartedAt"

// AnnotationManifestUID keeps, on a pod Regenerate made, the UID its manifest
// gives it, by which the manifest kept for the pod is found again (the
// agent's SeenStore). The agent's own, as AnnotationContainerHashes: a
// manifest's value is dropped, and /pods does not show it.
const AnnotationManifestUID = "staticpodd.io/manifest-uid"

// ManifestUID is the UID pod's manifest gives it, before any Regenerate.
func ManifestUID(pod *v1.Pod) string {
	if uid := pod.Annotations[AnnotationManifestUID]; uid != "" {
		return uid
	}
	return string(pod.UID)
}

// Regenerate returns a copy of p that is another generation of the same
// manifest: its UID (and config.hash, which the mirror pod carries) is the
// MD5 of p's UID and salt, and it carries annotations besides its own. The
// same p and salt always give the same UID, so a daemon that restarts
// computes again the generation it was running; a new salt is a new pod,
// stopped and started as for an edit of the manifest. An empty salt
// returns p unchanged.
//
// The kubelet has no such verb for static pods: kubectl rollout restart
// changes a workload's pod template, whose new hash makes a new pod.
// Hashing the salt into the UID does the same to a static pod.
func Regenerate(p Pod, salt string, annotations map[string]string) Pod {
	if salt == "" {
		return p
	}
	h := md5.New()
	fmt.Fprintf(h, "uid:%s\n%s", p.UID, salt)
	pod := p.Pod.DeepCopy()
	pod.UID = typesUID(hex.EncodeToString(h.Sum(nil)))
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	maps.Copy(pod.Annotations, annotations)
	pod.Annotations[AnnotationHash] = string(pod.UID)
	pod.Annotations[AnnotationManifestUID] = ManifestUID(p.Pod)
	p.Pod = pod
	return p
}

// RestartSalt is the salt of Regenerate for a pod restarted at at (the value
// of AnnotationRestartedAt).
func RestartSalt(at string) string {
	if at == "" {
		return ""
	}
	return "restartedAt:" + at + "\n"
}
