//go:build linux

package oci

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

// resolveEnvFiles gives each variable read from a file (fileKeyRef) its
// value, read now, as the kubelet does when it makes a container's
// environment: a missing key leaves an optional variable out and is an error
// otherwise; a missing or malformed file is an error either way. An error
// wraps podspec.ErrContainerConfig (CreateContainerConfigError).
func resolveEnvFiles(env []podspec.EnvVar) ([]podspec.EnvVar, error) {
	var out []podspec.EnvVar
	for i, e := range env {
		if e.File == nil {
			if out != nil {
				out = append(out, e)
			}
			continue
		}
		if out == nil {
			out = append(make([]podspec.EnvVar, 0, len(env)), env[:i]...)
		}
		value, err := readEnvFile(e.File)
		if err != nil {
			return nil, fmt.Errorf("%w: env %s: %w", podspec.ErrContainerConfig, e.Name, err)
		}
		// The kubelet takes an empty value for a missing key.
		if value == "" {
			if e.File.Optional {
				continue
			}
			return nil, fmt.Errorf("%w: env %s: environment variable key %q not found in file %q", podspec.ErrContainerConfig, e.Name, e.File.Key, e.File.Path)
		}
		e.Value, e.File = value, nil
		out = append(out, e)
	}
	if out == nil {
		return env, nil
	}
	return out, nil
}

// readEnvFile reads f's key from the file at f.Path inside f.Dir. The file
// and the volume are the container's: the path is resolved inside the
// volume, a symlink on the way scoped to it as the kubelet's SecureJoin
// scopes it (RESOLVE_IN_ROOT), and only a regular file is read, at most
// maxEnvFileSize of it.
func readEnvFile(f *podspec.EnvFile) (string, error) {
	fh, err := openInVolume(f.Dir, f.Path)
	if err != nil {
		return "", fmt.Errorf("cannot open env file %q: %w", f.Path, err)
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return "", fmt.Errorf("env file %q: %w", f.Path, err)
	}
	if fi.Size() > maxEnvFileSize {
		return "", fmt.Errorf("env file %q: %w", f.Path, errEnvFileTooLarge)
	}
	value, err := parseEnvFile(fh, f.Key)
	if err != nil {
		return "", fmt.Errorf("cannot parse env file %q: %w", f.Path, err)
	}
	return value, nil
}

// openInVolume opens p for reading inside root, which it never leaves: on
// kernels with openat2 a symlink is resolved as if root were /, without one
// (before 5.6) a symlink anywhere is refused. The container wrote the volume
// and may have made a device node or a FIFO there (CAP_MKNOD), which the
// daemon, host root outside the container's devices cgroup, must not open:
// opening /dev/watchdog arms it. So p is looked up with O_PATH, which opens
// nothing, and opened only when it is a regular file (logfiles.ReopenRegular).
func openInVolume(root, p string) (*os.File, error) {
	rel := strings.TrimPrefix(path.Clean("/"+p), "/")
	if rel == "" {
		return nil, errors.New("not a file in the volume")
	}
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open volume: %w", err)
	}
	defer unix.Close(rootFd)
	const flags = unix.O_PATH | unix.O_CLOEXEC
	how := unix.OpenHow{Flags: flags, Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	var fd int
	for range 16 {
		fd, err = unix.Openat2(rootFd, rel, &how)
		if !errors.Is(err, unix.EAGAIN) && !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if errors.Is(err, unix.ENOSYS) {
		fd, err = openNoSymlinksFile(rootFd, rel, flags)
	}
	if err != nil {
		return nil, resolveError(err)
	}
	defer unix.Close(fd)
	rfd, err := logfiles.ReopenRegular(fd, unix.O_RDONLY|unix.O_NOCTTY)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(rfd), path.Join(root, rel)), nil
}

// openNoSymlinksFile opens p below dirfd with flags, following no symlink.
func openNoSymlinksFile(dirfd int, p string, flags int) (int, error) {
	dir, name := path.Split(p)
	parent := dirfd
	if dir != "" {
		fd, err := openNoSymlinks(dirfd, strings.TrimSuffix(dir, "/"))
		if err != nil {
			return -1, err
		}
		defer unix.Close(fd)
		parent = fd
	}
	return unix.Openat(parent, name, flags|unix.O_NOFOLLOW, 0)
}
