package manifest

import (
	"errors"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Paths are the host directories conversion needs.
type Paths struct {
	RootDir    string // volumes live under <RootDir>/pods/<uid>/volumes
	PodLogsDir string // default /var/log/pods
}

// Sandbox returns the runtime's view of pod's sandbox.
func Sandbox(pod *v1.Pod, p Paths) *podspec.Pod {
	return &podspec.Pod{}
}

// Container resolves container c of pod for the runtime: $(VAR) expansion of env,
// command and args; volumes to mounts; resources and security context; the hash;
// LogPath for the given attempt. It creates nothing on disk.
func Container(pod *v1.Pod, c *v1.Container, attempt int, p Paths) (*podspec.Container, error) {
	return nil, errors.New("manifest.Container: not implemented yet")
}

// PrepareVolumes creates what pod's volumes need on the host before its containers
// start: emptyDir directories, hostPath DirectoryOrCreate/FileOrCreate, and checks
// hostPath types. It is idempotent.
func PrepareVolumes(pod *v1.Pod, p Paths) error {
	return errors.New("manifest.PrepareVolumes: not implemented yet")
}

// RemoveVolumes deletes <RootDir>/pods/<uid> (emptyDirs); hostPaths are untouched.
func RemoveVolumes(podUID string, p Paths) error {
	return errors.New("manifest.RemoveVolumes: not implemented yet")
}
