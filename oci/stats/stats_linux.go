//go:build linux && cgo

package stats

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/cgroups"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/host"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

// CgroupRootDir is where the cgroup filesystems are mounted.
const CgroupRootDir = "/sys/fs/cgroup"

// The v1 controllers stats read, and where each is mounted (found once).
var (
	v1Controllers = []string{"memory", "cpuacct", "cpu", "pids"}
	v1MountsOnce  sync.Once
	v1Mounts      map[string]string
)

// DirsOf returns the directories of the cgroupfs cgroup cgPath: the unified
// one on cgroup v2, one per controller stats read on v1 (as libcontainer's
// fs managers place them).
func DirsOf(cgPath string) Dirs {
	if cgroups.IsCgroup2UnifiedMode() {
		return Dirs{"": filepath.Join(CgroupRootDir, cgPath)}
	}
	v1MountsOnce.Do(func() {
		v1Mounts = map[string]string{}
		for _, c := range v1Controllers {
			if mnt, err := cgroups.FindCgroupMountpoint("", c); err == nil {
				v1Mounts[c] = mnt
			}
		}
	})
	d := Dirs{}
	for c, mnt := range v1Mounts {
		d[c] = filepath.Join(mnt, cgPath)
	}
	return d
}

// LogBytes is the size of a container's log and of its rotated files
// (<log>.<time>, gzipped or not).
func LogBytes(logPath string) uint64 {
	if logPath == "" {
		return 0
	}
	// Beneath podLogsDir through no symlink, and each file stat'ed in the
	// directory so opened (see logfiles.OpenContainerDir).
	dir, err := logfiles.OpenContainerDir(filepath.Dir(logPath))
	if err != nil {
		return 0
	}
	defer dir.Close()
	names, err := dir.Readdirnames(-1)
	if err != nil {
		return 0
	}
	base := filepath.Base(logPath)
	var n uint64
	for _, name := range names {
		if name != base && !strings.HasPrefix(name, base+".") {
			continue
		}
		var st unix.Stat_t
		if unix.Fstatat(int(dir.Fd()), name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFREG {
			n += uint64(st.Size)
		}
	}
	return n
}

// NodeConfig says where Node measures the node.
type NodeConfig struct {
	// RootDir is the daemon's persistent root: NodeFs is its file system,
	// ImageFs that of its images directory.
	RootDir string
	// PodsCgroup is the pods' parent cgroup, as a path in the cgroup file
	// system: its working set is PodsMemoryWorkingSet.
	PodsCgroup string
	// NodeCgroup, for tests only: the cgroupfs cgroup whose memory and pids
	// limits and usage stand for the node's. "" = the node itself.
	NodeCgroup string
}

// Node measures the node: its memory as the kubelet's cadvisor does
// (capacity from /proc/meminfo, working set of the root cgroup), or, when
// NodeCgroup is set, the memory limit and usage of that cgroup; processes
// (pid_max and threads-max, and how many there are), or NodeCgroup's pids.max
// and pids.current; and the filesystems of RootDir and its images.
func Node(cfg NodeConfig) (podspec.NodeStats, error) {
	n := podspec.NodeStats{Time: time.Now()}
	var errs []error
	if cfg.NodeCgroup != "" {
		d := DirsOf(cfg.NodeCgroup)
		u, err := ReadUsage(d)
		errs = append(errs, err)
		mem, pids, err := ReadLimits(d)
		errs = append(errs, err)
		if mem == 0 {
			mem, _ = memTotal()
		}
		n.MemoryCapacity, n.MemoryUsage, n.MemoryWorkingSet = mem, u.MemoryUsage, u.MemoryWorkingSet
		n.CPUUsageNanos = u.CPUUsageNanos
		n.MaxPID, n.NumPIDs = pids, u.Pids
		if pids == 0 {
			n.MaxPID, _ = maxPID()
		}
	} else {
		total, err := memTotal()
		errs = append(errs, err)
		n.MemoryCapacity = total
		n.MemoryUsage, n.MemoryWorkingSet, n.CPUUsageNanos, err = rootUsage(total)
		errs = append(errs, err)
		n.MaxPID, err = maxPID()
		errs = append(errs, err)
		var si unix.Sysinfo_t
		if err := unix.Sysinfo(&si); err == nil {
			n.NumPIDs = uint64(si.Procs)
		}
	}
	if u, err := ReadUsage(DirsOf(cfg.PodsCgroup)); err == nil {
		n.PodsMemoryWorkingSet = u.MemoryWorkingSet
	}
	var err error
	n.NodeFs, err = fsStats(cfg.RootDir)
	errs = append(errs, err)
	n.ImageFs, err = fsStats(filepath.Join(cfg.RootDir, "images"))
	errs = append(errs, err)
	n.Network, err = HostNetDev()
	errs = append(errs, err)
	return n, errors.Join(errs...)
}

// rootUsage is the root cgroup's memory usage, working set and CPU time,
// read once. v1 has them in the root memory and cpuacct cgroups; v2's root
// has no memory.current, so usage is MemTotal − MemFree, as cadvisor takes it.
func rootUsage(total uint64) (usage, ws, cpu uint64, err error) {
	d := DirsOf("/")
	if !d.Unified() {
		u, err := ReadUsage(d)
		return u.MemoryUsage, u.MemoryWorkingSet, u.CPUUsageNanos, err
	}
	// v2's root has cpu.stat, though not memory.current.
	cs, err := readFlat(d[""], "cpu.stat", "usage_usec")
	if err != nil {
		return 0, 0, 0, err
	}
	cpu = cs[0] * 1000
	mi, err := host.ReadMemory(host.Meminfo)
	if err != nil {
		return 0, 0, cpu, err
	}
	usage = total - min(total, mi.Free)
	stat, err := readFlat(d[""], "memory.stat", "inactive_file")
	if err != nil {
		return usage, usage, cpu, err
	}
	return usage, workingSet(usage, stat[0]), cpu, nil
}

// memTotal is MemTotal in bytes, never 0 without an error.
func memTotal() (uint64, error) {
	mi, err := host.ReadMemory(host.Meminfo)
	if err != nil {
		return 0, err
	}
	return mi.Total, nil
}

// maxPID is the kubelet's: the lower of kernel.pid_max and kernel.threads-max.
func maxPID() (uint64, error) {
	pm, err := readUint("/proc/sys/kernel", "pid_max")
	if err != nil {
		return 0, err
	}
	if tm, err := readUint("/proc/sys/kernel", "threads-max"); err == nil && tm < pm {
		pm = tm
	}
	return pm, nil
}

// fsStats is statfs of dir: bytes available to unprivileged users and free
// inodes, as cadvisor reports them.
func fsStats(dir string) (podspec.FsStats, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return podspec.FsStats{}, fmt.Errorf("statfs %s: %w", dir, err)
	}
	bs := uint64(st.Bsize)
	return podspec.FsStats{
		CapacityBytes:  st.Blocks * bs,
		AvailableBytes: st.Bavail * bs,
		Inodes:         st.Files,
		InodesFree:     st.Ffree,
	}, nil
}
