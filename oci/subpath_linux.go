//go:build linux

package oci

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// subPathsDir, in a container's state dir, holds the bind mounts of its
// subPaths, one per mount index.
const subPathsDir = "subpaths"

// bindSubPaths resolves the SubPath of each of ms inside its Source and
// bind-mounts what it opened at dir/<index>, by file descriptor: whatever a
// container does to the volume between the check and the mount, the bind is of
// the file that was checked (the kubelet's doBindSubPath, runc's mountViaFds).
// It returns ms with those mounts' Source set to their bind and SubPath
// cleared. An error wraps podspec.ErrContainerConfig; binds made before it
// stay for unmountSubPaths to remove.
func bindSubPaths(dir string, ms []podspec.Mount) ([]podspec.Mount, error) {
	var out []podspec.Mount
	for i, m := range ms {
		if m.SubPath == "" {
			continue
		}
		if out == nil {
			out = append([]podspec.Mount(nil), ms...)
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return nil, fmt.Errorf("bind subPaths: %w", err)
			}
		}
		target := filepath.Join(dir, strconv.Itoa(i))
		if err := bindSubPath(m.Source, m.SubPath, target); err != nil {
			return nil, fmt.Errorf("%w: volumeMount at %s: subPath %q: %w", podspec.ErrContainerConfig, m.Destination, m.SubPath, err)
		}
		out[i].Source, out[i].SubPath = target, ""
	}
	if out == nil {
		return ms, nil
	}
	return out, nil
}

func bindSubPath(root, sub, target string) error {
	f, err := openSubPath(root, sub)
	if err != nil {
		return err
	}
	defer f.Close()
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return fmt.Errorf("stat: %w", err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		err = os.Mkdir(target, 0o700)
	} else {
		var t *os.File
		if t, err = os.OpenFile(target, os.O_CREATE|os.O_EXCL|os.O_RDONLY, 0o600); err == nil {
			err = t.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("make bind target: %w", err)
	}
	// A recursive bind, like the rbind of a whole volume: what the host
	// shows at the subPath is what the container sees.
	src := "/proc/thread-self/fd/" + strconv.Itoa(int(f.Fd()))
	if err := unix.Mount(src, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	// Out of the source's peer group: nothing mounted here shows anywhere
	// else, nor the other way (the kubelet's default propagation, None).
	if err := unix.Mount("", target, "", unix.MS_PRIVATE|unix.MS_REC, ""); err != nil {
		return fmt.Errorf("make bind private: %w", err)
	}
	// What is mounted is what was opened; a check that cannot fail short of
	// a kernel that resolves the fd link otherwise, so say so if it does.
	var got unix.Stat_t
	if err := unix.Stat(target, &got); err != nil {
		return fmt.Errorf("stat bind: %w", err)
	}
	if got.Dev != st.Dev || got.Ino != st.Ino {
		return errors.New("bind: the mounted file is not the one opened")
	}
	return nil
}

// openSubPath opens sub inside root with O_PATH, without leaving root: a
// symlink on the way is followed only while it stays inside (RESOLVE_BENEATH;
// an absolute symlink or a "../" out of root is refused). Missing directories
// are made with root's mode, as the kubelet's SafeMakeDir does. root itself
// is trusted (an emptyDir of the daemon's, a hostPath of the operator's).
func openSubPath(root, sub string) (*os.File, error) {
	if sub == "" || filepath.IsAbs(sub) || sub != filepath.Clean(sub) || hasDotDot(sub) {
		return nil, fmt.Errorf("must be a clean relative path without '..'")
	}
	rootFd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open volume: %w", err)
	}
	defer unix.Close(rootFd)
	var rst unix.Stat_t
	if err := unix.Fstat(rootFd, &rst); err != nil {
		return nil, fmt.Errorf("stat volume: %w", err)
	}
	mode := rst.Mode & 0o7777
	open := openBeneath
	fd, err := open(rootFd, sub)
	if errors.Is(err, unix.ENOSYS) {
		open = openNoSymlinks
		fd, err = open(rootFd, sub)
	}
	if errors.Is(err, unix.ENOENT) {
		if err = mkdirIn(rootFd, sub, mode, open); err == nil {
			fd, err = open(rootFd, sub)
		}
	}
	if err != nil {
		return nil, resolveError(err)
	}
	return os.NewFile(uintptr(fd), filepath.Join(root, sub)), nil
}

// resolveError says why a subPath could not be opened, in words for the
// pod's status.
func resolveError(err error) error {
	switch {
	case errors.Is(err, unix.EXDEV):
		return errors.New("it leaves the volume (through a symlink or a mount)")
	case errors.Is(err, unix.ELOOP):
		return errors.New("it has too many levels of symlinks, or a symlink this kernel cannot resolve safely")
	case errors.Is(err, unix.ENOTDIR):
		return errors.New("a component of it is not a directory")
	}
	return err
}

func hasDotDot(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return true
		}
	}
	return false
}

// openBeneath is openat2(dirfd, p, O_PATH, RESOLVE_BENEATH|RESOLVE_NO_MAGICLINKS).
// EAGAIN (a rename raced a "..") is retried a few times.
func openBeneath(dirfd int, p string) (int, error) {
	how := unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS,
	}
	for range 16 {
		fd, err := unix.Openat2(dirfd, p, &how)
		if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
			continue
		}
		return fd, err
	}
	return -1, fmt.Errorf("openat2 %s: %w", p, unix.EAGAIN)
}

// openNoSymlinks opens p below dirfd one component at a time without
// following any symlink, for kernels without openat2 (before 5.6): a symlink
// anywhere in a subPath is refused (ELOOP), even one that stays inside.
func openNoSymlinks(dirfd int, p string) (int, error) {
	cur, err := unix.Dup(dirfd)
	if err != nil {
		return -1, err
	}
	for _, c := range strings.Split(p, "/") {
		next, err := unix.Openat(cur, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(cur)
		if err != nil {
			return -1, err
		}
		var st unix.Stat_t
		if err := unix.Fstat(next, &st); err != nil {
			unix.Close(next)
			return -1, err
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			unix.Close(next)
			return -1, unix.ELOOP
		}
		cur = next
	}
	return cur, nil
}

// mkdirIn makes the missing directories of p below rootFd, each with mkdirat
// in its parent as open resolved it, so a symlink a container puts on the way
// is resolved (or refused) as open resolves it, never followed out.
func mkdirIn(rootFd int, p string, mode uint32, open func(int, string) (int, error)) error {
	parts := strings.Split(p, "/")
	for i := range parts {
		fd, err := open(rootFd, strings.Join(parts[:i+1], "/"))
		if err == nil {
			unix.Close(fd)
			continue
		}
		if !errors.Is(err, unix.ENOENT) {
			return err
		}
		parent := rootFd
		if i > 0 {
			if parent, err = open(rootFd, strings.Join(parts[:i], "/")); err != nil {
				return err
			}
		}
		err = mkdirMode(parent, parts[i], mode)
		if parent != rootFd {
			unix.Close(parent)
		}
		if err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("create directory %s: %w", strings.Join(parts[:i+1], "/"), err)
		}
	}
	return nil
}

// mkdirMode makes name in parent with mode exactly, whatever the daemon's
// umask: on a thread of its own whose umask is 0 (unshare(CLONE_FS) gives it
// its own), so that nothing is chmodded by name afterwards. A chmod by name,
// as the kubelet's doSafeMakeDir does, can be made to land on another
// directory a container swapped in between. The thread is never given back.
func mkdirMode(parent int, name string, mode uint32) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			done <- fmt.Errorf("unshare fs: %w", err)
			return
		}
		unix.Umask(0)
		done <- unix.Mkdirat(parent, name, mode)
	}()
	return <-done
}

// unmountSubPaths unmounts and removes the binds bindSubPaths made under the
// state dir dir. It never removes recursively: a bind it could not unmount
// is an error, not a volume emptied through it.
func unmountSubPaths(dir string) error {
	sub := filepath.Join(dir, subPathsDir)
	entries, err := os.ReadDir(sub)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("unmount subPaths: %w", err)
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(sub, e.Name())
		if err := unmountAll(p); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove subPath bind: %w", err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("unmount subPaths: %w", err)
	}
	if err := os.Remove(sub); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("unmount subPaths: %w", err)
	}
	return nil
}

// unmountAll unmounts p until nothing is mounted there (a start retried
// after a crash may have stacked binds).
func unmountAll(p string) error {
	for range 64 {
		err := unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
			return nil // not a mount point (any more)
		}
		if err != nil {
			return fmt.Errorf("unmount %s: %w", p, err)
		}
	}
	return fmt.Errorf("unmount %s: still mounted", p)
}
