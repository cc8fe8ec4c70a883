package manifest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

// PrepareVolumes creates what pod's volumes need on the host before its containers
// start: emptyDir directories (a size-limited tmpfs for medium Memory),
// downwardAPI volumes' files,
// hostPath DirectoryOrCreate/FileOrCreate, and checks hostPath types as the
// kubelet's hostPath checker does. It is idempotent. subPath directories are
// made by the runtime, inside the volume, when the container starts.
func PrepareVolumes(pod *v1.Pod, p Paths) error {
	var errs []error
	for i := range pod.Spec.Volumes {
		vol := &pod.Spec.Volumes[i]
		var err error
		switch {
		case vol.EmptyDir != nil:
			err = prepareEmptyDir(pod, vol, p)
		case vol.HostPath != nil:
			err = checkHostPath(vol.HostPath)
		case vol.DownwardAPI != nil:
			err = writeDownwardAPI(pod, vol, p)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("volume %s of pod %s: %w", vol.Name, pod.Name, err))
		}
	}
	return errors.Join(errs...)
}

func prepareEmptyDir(pod *v1.Pod, vol *v1.Volume, p Paths) error {
	dir := p.EmptyDir(string(pod.UID), vol.Name)
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return fmt.Errorf("create emptyDir: %w", err)
	}
	if vol.EmptyDir.Medium == v1.StorageMediumMemory {
		var size int64
		if l := vol.EmptyDir.SizeLimit; l != nil {
			size = l.Value()
		}
		if err := mountTmpfs(dir, size); err != nil {
			return err
		}
	}
	// The kubelet makes emptyDirs world-writable so any container user can use them.
	mode := fs.FileMode(0o777)
	// With fsGroup, the kubelet's SetVolumeOwnership at the emptyDir's setup
	// (always recursive: emptyDir passes no fsGroupChangePolicy), when it is
	// still empty: group fsGroup, group rwx and setgid, so what containers
	// create in it belongs to fsGroup. Only the volume's own directory is
	// changed, never what a container put in it. hostPath volumes are left
	// as they are, as by the kubelet.
	if sc := pod.Spec.SecurityContext; sc != nil && sc.FSGroup != nil {
		if err := os.Lchown(dir, -1, int(*sc.FSGroup)); err != nil {
			return fmt.Errorf("chown emptyDir to fsGroup %d: %w", *sc.FSGroup, err)
		}
		mode |= fs.ModeSetgid
	}
	if err := os.Chmod(dir, mode); err != nil {
		return fmt.Errorf("chmod emptyDir: %w", err)
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

// RemoveVolumes deletes <RootDir>/pods/<uid> (emptyDirs, unmounting memory-backed
// ones first); hostPaths are untouched.
func RemoveVolumes(podUID string, p Paths) error {
	dir := p.PodDir(podUID)
	emptyDirs := filepath.Join(dir, "volumes", "kubernetes.io~empty-dir")
	entries, err := os.ReadDir(emptyDirs)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove volumes of pod %s: %w", podUID, err)
	}
	for _, e := range entries {
		if err := unmountIfMounted(filepath.Join(emptyDirs, e.Name())); err != nil {
			return fmt.Errorf("remove volumes of pod %s: %w", podUID, err)
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("remove volumes of pod %s: %w", podUID, err)
	}
	return nil
}

// RemoveLogs deletes the pod's log directory, <PodLogsDir>/<ns>_<name>_<uid>, as
// the kubelet does once a removed pod's containers are gone.
func RemoveLogs(podUID string, p Paths) error {
	if p.PodLogsDir == "" || podUID == "" {
		return nil
	}
	dirs, err := filepath.Glob(filepath.Join(p.PodLogsDir, "*_"+podUID))
	if err != nil {
		return fmt.Errorf("remove logs of pod %s: %w", podUID, err)
	}
	for _, d := range dirs {
		if err := os.RemoveAll(d); err != nil {
			return fmt.Errorf("remove logs of pod %s: %w", podUID, err)
		}
	}
	return nil
}

// PruneLogs deletes the log files of container runs before keepFrom, as the
// kubelet's container garbage collection keeps only the current run and the one
// before it (for logs --previous). A run's files are its <attempt>.log and
// the files rotation made of it, as the kubelet's containerLogManager.Clean
// removes them together.
func PruneLogs(pod *v1.Pod, container string, keepFrom int, p Paths) error {
	if p.PodLogsDir == "" {
		return nil
	}
	dir := filepath.Join(p.LogDir(pod), container)
	// Opened beneath podLogsDir through no symlink, and the files removed
	// in it by name: a container that mounts podLogsDir may have swapped
	// its directory for a symlink to a host directory.
	d, err := logfiles.OpenContainerDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("prune logs of container %s of pod %s: %w", container, pod.Name, err)
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return fmt.Errorf("prune logs of container %s of pod %s: %w", container, pod.Name, err)
	}
	var errs []error
	for _, name := range names {
		n, ok := logfiles.LogAttempt(name)
		if !ok || n >= keepFrom {
			continue
		}
		if err := unix.Unlinkat(int(d.Fd()), name, 0); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove %s: %w", filepath.Join(dir, name), err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("prune logs of container %s of pod %s: %w", container, pod.Name, err)
	}
	return nil
}
