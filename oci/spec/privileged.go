package spec

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

// WithPrivileged makes a privileged container, as containerd's CRI plugin: every
// capability this process has, no masked or read-only paths, /sys and
// /sys/fs/cgroup writable, every host device present and allowed.
func WithPrivileged() SpecOpt {
	return func(s *specs.Spec) error {
		caps, err := currentCaps()
		if err != nil {
			return fmt.Errorf("privileged: %w", err)
		}
		setCaps(s, caps)
		s.Linux.MaskedPaths = nil
		s.Linux.ReadonlyPaths = nil
		for i, m := range s.Mounts {
			if m.Type == "sysfs" || m.Type == "cgroup" || m.Type == "cgroup2" {
				s.Mounts[i].Options = slices.DeleteFunc(slices.Clone(m.Options), func(o string) bool { return o == "ro" })
			}
		}
		devs, err := hostDevices("/dev")
		if err != nil {
			return fmt.Errorf("privileged: %w", err)
		}
		s.Linux.Devices = devs
		s.Linux.Resources.Devices = []specs.LinuxDeviceCgroup{{Allow: true, Access: "rwm"}}
		return nil
	}
}

// hostDevices lists the block and character devices under dir, skipping what every
// container gets its own of (as runc's HostDevices).
func hostDevices(dir string) ([]specs.LinuxDevice, error) {
	var out []specs.LinuxDevice
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // vanished while walking
			}
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "pts", "shm", "fd", "mqueue", ".lxc", ".lxd-mounts", ".udev":
				return filepath.SkipDir
			}
			return nil
		}
		if d.Name() == "console" || d.Type()&fs.ModeDevice == 0 {
			return nil
		}
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return nil
			}
			return fmt.Errorf("stat %s: %w", p, err)
		}
		typ := "c"
		if st.Mode&unix.S_IFMT == unix.S_IFBLK {
			typ = "b"
		}
		out = append(out, specs.LinuxDevice{
			Path:     p,
			Type:     typ,
			Major:    int64(unix.Major(uint64(st.Rdev))), // Rdev is int32 on some systems
			Minor:    int64(unix.Minor(uint64(st.Rdev))),
			FileMode: ptr(os.FileMode(st.Mode & 0o777)),
			UID:      ptr(st.Uid),
			GID:      ptr(st.Gid),
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list host devices in %s: %w", dir, err)
	}
	return out, nil
}
