// Package poddir names every path under <root-dir>/pods, the pods' persistent
// directories: the one owner of their layout, as the kubelet's getters
// (kubelet_getters.go: getPodsDir, getPodDir, getPodVolumesDir,
// getPodVolumeDir) are. It only names; agent/volumes makes a pod's volumes
// there and removes the whole directory with the pod, and the agent writes
// its records (seen, started, manifest.json, final.json, last.json,
// conditions.json, the probe and postStart marks) at the names given here.
// Paths only, no I/O (tests/deps_test.go, purePackages).
//
//	<root-dir>/pods/<uid>/
//	  seen, started, manifest.json           SeenStore's records
//	  final.json                             reclaimed containers' last statuses
//	  last.json                              the instances restarts replaced
//	  conditions.json                        the conditions last kept, with their times
//	  poststart/<container>.<attempt>        a postStart hook not done yet
//	  probes/<container-id>.<mark>           what a container's probes last said
//	  volumes/kubernetes.io~empty-dir/<name>
//	  volumes/kubernetes.io~downward-api/<name>
//	  volumes/kubernetes.io~configmap/<name>
//	  volumes/kubernetes.io~secret/<name>      a tmpfs
//	  volumes/kubernetes.io~projected/<name>   a tmpfs
package poddir

import (
	"fmt"
	"path/filepath"
)

// Volume plugin directories, as the kubelet names them (the plugin's name
// with '/' escaped to '~').
const (
	emptyDirPlugin    = "kubernetes.io~empty-dir"
	downwardAPIPlugin = "kubernetes.io~downward-api"
	configMapPlugin   = "kubernetes.io~configmap"
	secretPlugin      = "kubernetes.io~secret"
	projectedPlugin   = "kubernetes.io~projected"
)

// Root is the daemon's root directory (--root-dir).
type Root string

// Pods is <root-dir>/pods, which holds one directory per pod UID.
func (r Root) Pods() string {
	return filepath.Join(string(r), "pods")
}

// Pod is <root-dir>/pods/<uid>, everything staticpodd keeps of the pod that
// must outlive the daemon: it goes with the pod.
func (r Root) Pod(uid string) string {
	return filepath.Join(r.Pods(), uid)
}

// volumes is <root-dir>/pods/<uid>/volumes.
func (r Root) volumes(uid string) string {
	return filepath.Join(r.Pod(uid), "volumes")
}

// EmptyDirs is the directory of the pod's emptyDir volumes.
func (r Root) EmptyDirs(uid string) string {
	return filepath.Join(r.volumes(uid), emptyDirPlugin)
}

// EmptyDir is the host directory of emptyDir volume name, as the kubelet lays
// it out: <root-dir>/pods/<uid>/volumes/kubernetes.io~empty-dir/<name>.
func (r Root) EmptyDir(uid, name string) string {
	return filepath.Join(r.EmptyDirs(uid), name)
}

// DownwardAPI is the host directory of downwardAPI volume name, as the
// kubelet lays it out: <root-dir>/pods/<uid>/volumes/kubernetes.io~downward-api/<name>.
func (r Root) DownwardAPI(uid, name string) string {
	return filepath.Join(r.volumes(uid), downwardAPIPlugin, name)
}

// ConfigMap is the host directory of configMap volume name:
// <root-dir>/pods/<uid>/volumes/kubernetes.io~configmap/<name>.
func (r Root) ConfigMap(uid, name string) string {
	return filepath.Join(r.volumes(uid), configMapPlugin, name)
}

// Secrets is the directory of the pod's secret volumes, each a tmpfs.
func (r Root) Secrets(uid string) string {
	return filepath.Join(r.volumes(uid), secretPlugin)
}

// Secret is the host directory of secret volume name:
// <root-dir>/pods/<uid>/volumes/kubernetes.io~secret/<name>.
func (r Root) Secret(uid, name string) string {
	return filepath.Join(r.Secrets(uid), name)
}

// Projecteds is the directory of the pod's projected volumes, each a tmpfs.
func (r Root) Projecteds(uid string) string {
	return filepath.Join(r.volumes(uid), projectedPlugin)
}

// Projected is the host directory of projected volume name:
// <root-dir>/pods/<uid>/volumes/kubernetes.io~projected/<name>.
func (r Root) Projected(uid, name string) string {
	return filepath.Join(r.Projecteds(uid), name)
}

// Seen is the file of the pod's kubernetes.io/config.seen time.
func (r Root) Seen(uid string) string { return filepath.Join(r.Pod(uid), "seen") }

// Started is the file of the pod's status.startTime.
func (r Root) Started(uid string) string { return filepath.Join(r.Pod(uid), "started") }

// Manifest is the file of the manifest the pod was made from.
func (r Root) Manifest(uid string) string { return filepath.Join(r.Pod(uid), "manifest.json") }

// Final is the file of the last statuses of the pod's containers that
// node-level reclaim removed once the pod had finished with them.
func (r Root) Final(uid string) string { return filepath.Join(r.Pod(uid), "final.json") }

// Last is the file of the last instance of each of the pod's containers
// that a restart replaced (and removed): its lastState.
func (r Root) Last(uid string) string { return filepath.Join(r.Pod(uid), "last.json") }

// Conditions is the file of the conditions of the pod's status last
// published, with their transition times.
func (r Root) Conditions(uid string) string { return filepath.Join(r.Pod(uid), "conditions.json") }

// PostStartMark is the mark of a postStart hook of container's run attempt
// that has not succeeded yet.
func (r Root) PostStartMark(uid, container string, attempt int) string {
	return filepath.Join(r.Pod(uid), "poststart", fmt.Sprintf("%s.%d", container, attempt))
}

// ProbeMark is the mark that container id's probe result mark ("started",
// "ready") was last a success.
func (r Root) ProbeMark(uid, id, mark string) string {
	return filepath.Join(r.Pod(uid), "probes", id+"."+mark)
}
