package volumes

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"

	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"

	"github.com/staticpodd/staticpodd/agent/atomicdir"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
)

// SetUpError is why a configMap, secret or projected volume could not be
// written, worded as the kubelet's FailedMount event: `MountVolume.SetUp
// failed for volume "v" : configmap "x" not found`.
type SetUpError struct {
	Volume string
	Err    error
}

func (e *SetUpError) Error() string {
	return fmt.Sprintf("MountVolume.SetUp failed for volume %q : %v", e.Volume, e.Err)
}

func (e *SetUpError) Unwrap() error { return e.Err }

// SetUpErrors are the SetUpErrors in err (Prepare's or Refresh's).
func SetUpErrors(err error) []*SetUpError {
	var out []*SetUpError
	var walk func(error)
	walk = func(err error) {
		if su, ok := err.(*SetUpError); ok {
			out = append(out, su)
			return
		}
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				walk(e)
			}
		}
	}
	walk(err)
	return out
}

// mode is a volume's defaultMode, or def.
func mode(m *int32, def int32) fs.FileMode {
	if m != nil {
		return fs.FileMode(*m)
	}
	return fs.FileMode(def)
}

// keyFiles is the kubelet's configmap and secret MakePayload: every key of
// data at its own name, or only items' keys at their paths with their
// modes; a key items name that data lacks is an error (missing, the
// message after "references non-existent ") unless optional.
func keyFiles(items []v1.KeyToPath, data map[string][]byte, defaultMode fs.FileMode, optional bool, missing string) (map[string]atomicdir.File, error) {
	files := make(map[string]atomicdir.File, len(data))
	if len(items) == 0 {
		for k, d := range data {
			files[k] = atomicdir.File{Data: d, Mode: defaultMode}
		}
		return files, nil
	}
	for _, it := range items {
		d, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return nil, fmt.Errorf("%s: %s", missing, it.Key)
		}
		m := defaultMode
		if it.Mode != nil {
			m = fs.FileMode(*it.Mode)
		}
		files[it.Path] = atomicdir.File{Data: d, Mode: m}
	}
	return files, nil
}

// configMapData is a ConfigMap's data and binaryData in one map (the
// API server keeps their keys apart).
func configMapData(cm *v1.ConfigMap) map[string][]byte {
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	maps.Copy(data, cm.BinaryData)
	return data
}

// configMapFiles are the files of the ConfigMap name with items; a missing
// optional ConfigMap has none.
func configMapFiles(pod *v1.Pod, name string, items []v1.KeyToPath, defaultMode fs.FileMode, optional bool, h manifest.Host) (map[string]atomicdir.File, error) {
	cm, err := manifest.LookupConfigMap(h.Objects, pod.Namespace, name)
	if err != nil {
		if !optional {
			return nil, err
		}
		cm = &v1.ConfigMap{}
	}
	return keyFiles(items, configMapData(cm), defaultMode, optional, "configmap references non-existent config key")
}

// secretFiles are the files of the Secret name with items; a missing
// optional Secret has none.
func secretFiles(pod *v1.Pod, name string, items []v1.KeyToPath, defaultMode fs.FileMode, optional bool, h manifest.Host) (map[string]atomicdir.File, error) {
	s, err := manifest.LookupSecret(h.Objects, pod.Namespace, name)
	if err != nil {
		if !optional {
			return nil, err
		}
		s = &v1.Secret{}
	}
	return keyFiles(items, s.Data, defaultMode, optional, "references non-existent secret key")
}

// projectedFiles is the kubelet's projected collectData: the files of every
// source, a later one's replacing an earlier one's at the same path; the
// errors of all sources together.
func projectedFiles(pod *v1.Pod, src *v1.ProjectedVolumeSource, h manifest.Host) (map[string]atomicdir.File, error) {
	defaultMode := mode(src.DefaultMode, v1.ProjectedVolumeSourceDefaultMode)
	files := map[string]atomicdir.File{}
	var errs []error
	for _, s := range src.Sources {
		var part map[string]atomicdir.File
		var err error
		switch {
		case s.ConfigMap != nil:
			part, err = configMapFiles(pod, s.ConfigMap.Name, s.ConfigMap.Items, defaultMode, s.ConfigMap.Optional != nil && *s.ConfigMap.Optional, h)
		case s.Secret != nil:
			part, err = secretFiles(pod, s.Secret.Name, s.Secret.Items, defaultMode, s.Secret.Optional != nil && *s.Secret.Optional, h)
		case s.DownwardAPI != nil:
			m := int32(defaultMode)
			part, err = downwardAPIFiles(pod, &v1.DownwardAPIVolumeSource{Items: s.DownwardAPI.Items, DefaultMode: &m}, h)
		default:
			// Validation refuses the API server's own sources.
			err = errors.New("only configMap, secret and downwardAPI sources are supported")
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		maps.Copy(files, part)
	}
	if agg := utilerrors.NewAggregate(errs); agg != nil {
		return nil, agg
	}
	return files, nil
}

// writeObjectVolume writes a configMap, secret or projected volume of pod
// in the kubelet's atomic layout, files owned by the pod's fsGroup if it
// has one; a secret or projected one on a tmpfs of its own, so that what
// it holds is never written to a disk. A volume whose files did not
// change is left alone. The files are made before anything on the host:
// a missing object leaves no directory behind.
func writeObjectVolume(pod *v1.Pod, vol *v1.Volume, root poddir.Root, h manifest.Host) error {
	uid := string(pod.UID)
	var files map[string]atomicdir.File
	var dir string
	var err error
	memory := true
	switch src := vol.VolumeSource; {
	case src.ConfigMap != nil:
		c := src.ConfigMap
		dir, memory = root.ConfigMap(uid, vol.Name), false
		files, err = configMapFiles(pod, c.Name, c.Items, mode(c.DefaultMode, v1.ConfigMapVolumeSourceDefaultMode), c.Optional != nil && *c.Optional, h)
	case src.Secret != nil:
		s := src.Secret
		dir = root.Secret(uid, vol.Name)
		files, err = secretFiles(pod, s.SecretName, s.Items, mode(s.DefaultMode, v1.SecretVolumeSourceDefaultMode), s.Optional != nil && *s.Optional, h)
	case src.Projected != nil:
		dir = root.Projected(uid, vol.Name)
		files, err = projectedFiles(pod, src.Projected, h)
	default:
		return nil
	}
	if err != nil {
		return &SetUpError{Volume: vol.Name, Err: err}
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return &SetUpError{Volume: vol.Name, Err: err}
	}
	// The kubelet sets these volumes up on an emptyDir it wraps, so the
	// pod's users enter it as the kubelet's.
	if memory {
		if err := mountTmpfs(dir, manifest.MemoryVolumeSize(pod, h)); err != nil {
			return &SetUpError{Volume: vol.Name, Err: err}
		}
	}
	if err := ownVolumeDir(pod, dir, memory, "volume"); err != nil {
		return &SetUpError{Volume: vol.Name, Err: err}
	}
	gid := -1
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		gid = int(*sc.FSGroup)
	}
	if _, err := atomicdir.Write(dir, files, gid); err != nil {
		return &SetUpError{Volume: vol.Name, Err: fmt.Errorf("write: %w", err)}
	}
	return nil
}

// memoryVolumes are the directories of uid's volumes that may be a tmpfs:
// emptyDirs (medium Memory), secret and projected volumes.
func memoryVolumes(root poddir.Root, uid string) ([]string, error) {
	var dirs []string
	for _, plugin := range []struct {
		dir  string
		path func(uid, name string) string
	}{{root.EmptyDirs(uid), root.EmptyDir}, {root.Secrets(uid), root.Secret}, {root.Projecteds(uid), root.Projected}} {
		entries, err := os.ReadDir(plugin.dir)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		for _, e := range entries {
			dirs = append(dirs, plugin.path(uid, e.Name()))
		}
	}
	return dirs, nil
}
