package spec

import (
	"os"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// DefaultPath is the PATH a container gets when neither its image nor its pod sets
// one (containerd's and Docker's).
const DefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// DefaultCapabilities is Docker's and containerd's default capability set.
var DefaultCapabilities = []string{
	"CAP_CHOWN",
	"CAP_DAC_OVERRIDE",
	"CAP_FSETID",
	"CAP_FOWNER",
	"CAP_MKNOD",
	"CAP_NET_RAW",
	"CAP_SETGID",
	"CAP_SETUID",
	"CAP_SETFCAP",
	"CAP_SETPCAP",
	"CAP_NET_BIND_SERVICE",
	"CAP_SYS_CHROOT",
	"CAP_KILL",
	"CAP_AUDIT_WRITE",
}

// DefaultMaskedPaths and DefaultReadonlyPaths are containerd's: kernel interfaces a
// container must not read or write unless privileged.
var (
	DefaultMaskedPaths = []string{
		"/proc/acpi",
		"/proc/asound",
		"/proc/kcore",
		"/proc/keys",
		"/proc/latency_stats",
		"/proc/timer_list",
		"/proc/timer_stats",
		"/proc/sched_debug",
		"/proc/scsi",
		"/sys/firmware",
		"/sys/devices/virtual/powercap",
	}
	DefaultReadonlyPaths = []string{
		"/proc/bus",
		"/proc/fs",
		"/proc/irq",
		"/proc/sys",
		"/proc/sysrq-trigger",
	}
)

// Default returns the spec every container starts from, as containerd's default
// Linux spec with its CRI plugin's changes (no /run tmpfs, /sys/fs/cgroup read-only):
// the usual pseudo-filesystems, Docker's capabilities, masked and read-only /proc
// paths, the default devices, and new namespaces of every kind a pod may share
// (WithNamespaces decides which are joined instead).
func Default() *specs.Spec {
	caps := append([]string(nil), DefaultCapabilities...)
	s := &specs.Spec{
		Version: specs.Version,
		Root:    &specs.Root{Path: "rootfs"},
		Process: &specs.Process{
			Cwd:      "/",
			Env:      nil,
			Terminal: false,
			Capabilities: &specs.LinuxCapabilities{
				Bounding:  caps,
				Effective: append([]string(nil), caps...),
				Permitted: append([]string(nil), caps...),
			},
		},
		Mounts: defaultMounts(),
		Linux: &specs.Linux{
			MaskedPaths:   append([]string(nil), DefaultMaskedPaths...),
			ReadonlyPaths: append([]string(nil), DefaultReadonlyPaths...),
			Resources: &specs.LinuxResources{
				Devices: defaultDeviceRules(),
			},
			Devices: defaultDevices(),
			Namespaces: []specs.LinuxNamespace{
				{Type: specs.PIDNamespace},
				{Type: specs.IPCNamespace},
				{Type: specs.UTSNamespace},
				{Type: specs.MountNamespace},
				{Type: specs.NetworkNamespace},
			},
		},
	}
	return s
}

func defaultMounts() []specs.Mount {
	return []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/dev", Type: "tmpfs", Source: "tmpfs", Options: []string{"nosuid", "strictatime", "mode=755", "size=65536k"}},
		{Destination: "/dev/pts", Type: "devpts", Source: "devpts", Options: []string{"nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620", "gid=5"}},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm", Options: []string{"nosuid", "noexec", "nodev", "mode=1777", "size=65536k"}},
		{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue", Options: []string{"nosuid", "noexec", "nodev"}},
		{Destination: "/sys", Type: "sysfs", Source: "sysfs", Options: []string{"nosuid", "noexec", "nodev", "ro"}},
		{Destination: "/sys/fs/cgroup", Type: "cgroup", Source: "cgroup", Options: []string{"nosuid", "noexec", "nodev", "relatime", "ro"}},
	}
}

func ptr[T any](v T) *T { return &v }

// defaultDevices are the device nodes every container gets (containerd's
// WithDefaultUnixDevices).
func defaultDevices() []specs.LinuxDevice {
	dev := func(path string, major, minor int64) specs.LinuxDevice {
		return specs.LinuxDevice{
			Path: path, Type: "c", Major: major, Minor: minor,
			FileMode: ptr[os.FileMode](0o666), UID: ptr[uint32](0), GID: ptr[uint32](0),
		}
	}
	return []specs.LinuxDevice{
		dev("/dev/null", 1, 3),
		dev("/dev/random", 1, 8),
		dev("/dev/full", 1, 7),
		dev("/dev/tty", 5, 0),
		dev("/dev/zero", 1, 5),
		dev("/dev/urandom", 1, 9),
	}
}

// defaultDeviceRules is the devices cgroup: deny everything, then allow the default
// nodes, consoles, ptys and /dev/net/tun, as containerd does.
func defaultDeviceRules() []specs.LinuxDeviceCgroup {
	allow := func(major, minor int64) specs.LinuxDeviceCgroup {
		r := specs.LinuxDeviceCgroup{Allow: true, Type: "c", Major: ptr(major), Access: "rwm"}
		if minor >= 0 {
			r.Minor = ptr(minor)
		}
		return r
	}
	return []specs.LinuxDeviceCgroup{
		{Allow: false, Access: "rwm"},
		allow(1, 3),    // /dev/null
		allow(1, 8),    // /dev/random
		allow(1, 7),    // /dev/full
		allow(5, 0),    // /dev/tty
		allow(1, 5),    // /dev/zero
		allow(1, 9),    // /dev/urandom
		allow(5, 1),    // /dev/console
		allow(136, -1), // /dev/pts/*
		allow(5, 2),    // /dev/ptmx
		allow(10, 200), // /dev/net/tun
	}
}
