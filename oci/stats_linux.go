//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
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

// cgroupRootDir is where the cgroup filesystems are mounted.
const cgroupRootDir = "/sys/fs/cgroup"

// The v1 controllers stats read, and where each is mounted (found once).
var (
	v1Controllers = []string{"memory", "cpuacct", "pids"}
	v1MountsOnce  sync.Once
	v1Mounts      map[string]string
)

// dirsOf returns the directories of the cgroupfs cgroup cgPath: the unified
// one on cgroup v2, one per controller stats read on v1 (as libcontainer's
// fs managers place them).
func dirsOf(cgPath string) cgDirs {
	if cgroups.IsCgroup2UnifiedMode() {
		return cgDirs{"": filepath.Join(cgroupRootDir, cgPath)}
	}
	v1MountsOnce.Do(func() {
		v1Mounts = map[string]string{}
		for _, c := range v1Controllers {
			if mnt, err := cgroups.FindCgroupMountpoint("", c); err == nil {
				v1Mounts[c] = mnt
			}
		}
	})
	d := cgDirs{}
	for c, mnt := range v1Mounts {
		d[c] = filepath.Join(mnt, cgPath)
	}
	return d
}

// NodeStats measures the node alone: what the eviction manager reads at
// each housekeeping, where reading every pod's and container's cgroup files,
// records and network counters was most of an idle daemon's CPU (0.4% of a
// core with 100 pods).
func (r *Runtime) NodeStats(context.Context) (podspec.NodeStats, error) { return r.nodeStats() }

// Stats measures the node and every pod that has a sandbox, with its
// containers. A pod or container that goes meanwhile is left out.
func (r *Runtime) Stats(ctx context.Context) (*podspec.Summary, error) {
	var errs []error
	node, err := r.nodeStats()
	if err != nil {
		errs = append(errs, err)
	}
	sum := &podspec.Summary{Node: node}

	recs, err := r.containerRecords()
	if err != nil {
		errs = append(errs, err)
	}
	live := map[string]bool{}
	for _, rec := range recs {
		live[rec.ID] = true
	}
	r.forgetLayers(live)
	uids, err := r.ListSandboxes(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, uid := range uids {
		var pr podRecord
		if err := readJSON(filepath.Join(r.podDir(uid), podFile), &pr); err != nil {
			continue // being made or removed
		}
		ps := podspec.PodStats{UID: uid, Namespace: pr.Namespace, Name: pr.Name}
		if ps.Network, err = r.podNetDev(uid); err != nil && !errors.Is(err, podspec.ErrNotExist) && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("network stats of pod %s: %w", pr.Name, err))
		}
		if ps.Usage, err = readUsage(dirsOf(cgroupFSPath(pr.CgroupsPath))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("stats of pod %s: %w", pr.Name, err))
		}
		for _, rec := range recs {
			if rec.PodUID != uid {
				continue
			}
			cs := podspec.ContainerStats{ID: rec.ID, Name: rec.Name}
			if cs.Usage, err = readUsage(dirsOf(cgroupFSPath(containerCgroupsPath(pr.CgroupsPath, rec.ID)))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("stats of container %s: %w", rec.ID, err))
			}
			cs.RootfsBytes = r.writableBytes(rec.ID, node.Time)
			cs.LogsBytes = logBytes(rec.LogPath)
			ps.Containers = append(ps.Containers, cs)
		}
		sum.Pods = append(sum.Pods, ps)
	}
	return sum, errors.Join(errs...)
}

// containerRecords reads the record of every container there is.
func (r *Runtime) containerRecords() ([]containerRecord, error) {
	entries, err := os.ReadDir(filepath.Join(r.cfg.RunDir, containersDir))
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var out []containerRecord
	for _, e := range entries {
		var rec containerRecord
		if readJSON(filepath.Join(r.containerDir(e.Name()), containerFile), &rec) == nil {
			out = append(out, rec)
		}
	}
	return out, nil
}

// logBytes is the size of a container's log and of its rotated files
// (<log>.<time>, gzipped or not).
func logBytes(logPath string) uint64 {
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

// nodeStats measures the node: its memory as the kubelet's cadvisor does
// (capacity from /proc/meminfo, working set of the root cgroup), or, when
// NodeCgroup is set, the memory limit and usage of that cgroup; processes
// (pid_max and threads-max, and how many there are), or NodeCgroup's pids.max
// and pids.current; and the filesystems of RootDir and its images.
func (r *Runtime) nodeStats() (podspec.NodeStats, error) {
	n := podspec.NodeStats{Time: time.Now()}
	var errs []error
	if r.cfg.NodeCgroup != "" {
		d := dirsOf(r.cfg.NodeCgroup)
		u, err := readUsage(d)
		errs = append(errs, err)
		mem, pids, err := readLimits(d)
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
	if u, err := readUsage(dirsOf(rootFSPath(r.cfg.CgroupDriver, r.cfg.CgroupRoot))); err == nil {
		n.PodsMemoryWorkingSet = u.MemoryWorkingSet
	}
	var err error
	n.NodeFs, err = fsStats(r.cfg.RootDir)
	errs = append(errs, err)
	n.ImageFs, err = fsStats(filepath.Join(r.cfg.RootDir, "images"))
	errs = append(errs, err)
	n.Network, err = hostNetDev()
	errs = append(errs, err)
	return n, errors.Join(errs...)
}

// rootUsage is the root cgroup's memory usage, working set and CPU time,
// read once. v1 has them in the root memory and cpuacct cgroups; v2's root
// has no memory.current, so usage is MemTotal − MemFree, as cadvisor takes it.
func rootUsage(total uint64) (usage, ws, cpu uint64, err error) {
	d := dirsOf("/")
	if !d.unified() {
		u, err := readUsage(d)
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

// layerMaxAge is how long a writable layer's measured size is used before it
// is walked again: a container with a million files costs one walk per
// interval, not one per housekeeping (cadvisor walks every minute).
const layerMaxAge = 30 * time.Second

// layerSizes caches writable layer sizes by container ID.
type layerSizes struct {
	mu sync.Mutex // guards m
	m  map[string]layerSize
}

type layerSize struct {
	bytes uint64
	at    time.Time
}

// writableBytes is the size of container id's writable layer, measured at
// most layerMaxAge before now.
func (r *Runtime) writableBytes(id string, now time.Time) uint64 {
	ws, ok := r.cfg.Images.(interface {
		WritableBytes(string) (uint64, error)
	})
	if !ok {
		return 0
	}
	r.layers.mu.Lock()
	c, ok := r.layers.m[id]
	r.layers.mu.Unlock()
	if ok && now.Sub(c.at) < layerMaxAge {
		return c.bytes
	}
	n, err := ws.WritableBytes(id)
	if err != nil {
		return c.bytes
	}
	r.layers.mu.Lock()
	if r.layers.m == nil {
		r.layers.m = map[string]layerSize{}
	}
	r.layers.m[id] = layerSize{bytes: n, at: now}
	r.layers.mu.Unlock()
	return n
}

// forgetLayers drops the sizes of containers not in live.
func (r *Runtime) forgetLayers(live map[string]bool) {
	r.layers.mu.Lock()
	defer r.layers.mu.Unlock()
	for id := range r.layers.m {
		if !live[id] {
			delete(r.layers.m, id)
		}
	}
}
