// Package volumes prepares a pod's volumes on the host and removes them with
// the pod, as the kubelet's volume manager and its emptyDir, hostPath,
// downwardAPI, configMap, secret and projected plugins do: it makes emptyDir
// directories (a size-limited tmpfs for medium Memory) owned by the pod's
// fsGroup, writes downwardAPI volumes' files and the files of the pod's
// ConfigMaps and Secrets (secret and projected volumes on a tmpfs each), checks (and creates) hostPaths, and removes <root-dir>/pods/<uid>,
// whose layout agent/poddir names, when the pod goes or when a daemon finds
// it left over at start. What the volumes hold is decided by agent/manifest,
// which touches nothing on the host.
package volumes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
)

// Prepare creates what pod's volumes need on the host before its containers
// start: emptyDir directories (a size-limited tmpfs for medium Memory),
// downwardAPI volumes' files, configMap, secret and projected volumes' files
// from h.Objects (a SetUpError each that cannot be written: a missing
// object),
// hostPath DirectoryOrCreate/FileOrCreate, and checks hostPath types as the
// kubelet's hostPath checker does. It is idempotent. h is what downwardAPI
// items need of the machine (manifest.DownwardAPIValue). subPath directories are
// made by the runtime, inside the volume, when the container starts.
func Prepare(pod *v1.Pod, root poddir.Root, h manifest.Host) error {
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		var err error
		switch {
		case vol.EmptyDir != nil:
			err = prepareEmptyDir(pod, vol, root)
		case vol.HostPath != nil:
			err = checkHostPath(vol.HostPath)
		case vol.DownwardAPI != nil:
			err = writeDownwardAPI(pod, vol, root, h)
		case vol.ConfigMap != nil, vol.Secret != nil, vol.Projected != nil:
			if err = writeObjectVolume(pod, vol, root, h); err != nil {
				errs = append(errs, err) // worded as the kubelet's event
				continue
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %s of pod %s: %w", vol.Name, pod.Name, err))
		}
	}
	return errors.Join(errs...)
}

func prepareEmptyDir(pod *v1.Pod, vol *v1.Volume, root poddir.Root) error {
	dir := root.EmptyDir(string(pod.UID), vol.Name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create emptyDir: %w", err)
	}
	memory := vol.EmptyDir.Medium == v1.StorageMediumMemory
	if memory {
		var size int64
		if l := vol.EmptyDir.SizeLimit; l != nil {
			size = l.Value()
		}
		if err := mountTmpfs(dir, size); err != nil {
			return err
		}
	}
	return ownVolumeDir(pod, dir, memory, "emptyDir")
}

// ownVolumeDir gives the directory of a volume of pod, an emptyDir or one
// the kubelet sets up on an emptyDir it wraps (configMap, secret,
// projected), the kubelet's emptyDir mode: 0777, so that any container user
// can use it, and on a tmpfs (memory) 1777, its mount's default, which the
// kubelet keeps (its setupDir chmods only when the permission bits differ),
// so that one user cannot remove another's files. With fsGroup, it applies
// the kubelet's SetVolumeOwnership at the emptyDir's setup (always
// recursive: emptyDir passes no fsGroupChangePolicy), when it is still
// empty: group fsGroup, group rwx and setgid, so what containers create in it belongs to fsGroup. Only the
// volume's own directory is changed, never what a container put in it.
// hostPath volumes are left as they are, as by the kubelet. what names the
// volume's kind in an error.
func ownVolumeDir(pod *v1.Pod, dir string, memory bool, what string) error {
	mode := fs.FileMode(0o777)
	if memory {
		mode |= fs.ModeSticky
	}
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		if err := os.Lchown(dir, -1, int(*sc.FSGroup)); err != nil {
			return fmt.Errorf("chown %s to fsGroup %d: %w", what, *sc.FSGroup, err)
		}
		mode |= fs.ModeSetgid
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", what, err)
	}
	return nil
}

// checkHostPath is the kubelet's hostPath type checker (pkg/volume/hostpath).
func checkHostPath(h *v1.HostPathVolumeSource) error {
	t := v1.HostPathUnset
	if h.Type != nil {
		t = *h.Type
	}
	fi, err := os.Stat(h.Path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("hostPath %s: %w", h.Path, err)
	}
	want := func(ok bool, what string) error {
		if !exists {
			return fmt.Errorf("hostPath type check failed: %s is not a %s: it does not exist", h.Path, what)
		}
		if !ok {
			return fmt.Errorf("hostPath type check failed: %s is not a %s", h.Path, what)
		}
		return nil
	}
	switch t {
	case v1.HostPathUnset:
		return nil
	case v1.HostPathDirectoryOrCreate:
		if !exists {
			if err := os.MkdirAll(h.Path, 0o755); err != nil {
				return fmt.Errorf("hostPath %s: create directory: %w", h.Path, err)
			}
			return nil
		}
		return want(fi.IsDir(), "directory")
	case v1.HostPathFileOrCreate:
		if !exists {
			// Like the kubelet, the parent directory is not created.
			f, err := os.OpenFile(h.Path, os.O_RDONLY|os.O_CREATE|os.O_EXCL, 0o644)
			if err != nil {
				return fmt.Errorf("hostPath %s: create file: %w", h.Path, err)
			}
			return f.Close()
		}
		return want(fi.Mode().IsRegular(), "file")
	case v1.HostPathDirectory:
		return want(exists && fi.IsDir(), "directory")
	case v1.HostPathFile:
		return want(exists && fi.Mode().IsRegular(), "file")
	case v1.HostPathSocket:
		return want(exists && fi.Mode()&fs.ModeSocket != 0, "socket")
	case v1.HostPathCharDev:
		return want(exists && fi.Mode()&fs.ModeCharDevice != 0, "character device")
	case v1.HostPathBlockDev:
		return want(exists && fi.Mode()&fs.ModeDevice != 0 && fi.Mode()&fs.ModeCharDevice == 0, "block device")
	}
	return fmt.Errorf("hostPath %s: unknown type %q", h.Path, t)
}

// Remove deletes <root-dir>/pods/<uid> (volumes, unmounting memory-backed
// ones first, and everything else kept there of the pod); hostPaths are
// untouched.
func Remove(podUID string, root poddir.Root) error {
	dir := root.Pod(podUID)
	vols, err := memoryVolumes(root, podUID)
	if err != nil {
		return fmt.Errorf("remove volumes of pod %s: %w", podUID, err)
	}
	for _, v := range vols {
		if err := unmountIfMounted(v); err != nil {
			return fmt.Errorf("remove volumes of pod %s: %w", podUID, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove volumes of pod %s: %w", podUID, err)
	}
	return nil
}
