// Package cgroupv1mounts hands a cgroup v1 host's cgroup mounts, read once
// by the daemon, to the container monitors it starts, so that none of them
// reads the host's mount table again.
//
// libcontainer's cgroup v1 manager (opencontainers/cgroups) reads the
// process's mountinfo once per process when it cannot find the hierarchies
// at their default paths: when the first entry of /sys/fs/cgroup is not a v1
// hierarchy (a hybrid host, whose first entry is the cgroup2 "unified"
// mount), and for every controller of its list the host does not mount
// (rdma, misc, ...). Each container's monitor is a process of its own that
// creates one container, so each read the whole mount table, which grows by
// three mounts a pod: in a burst of 1000 pods, 85% of the monitors' CPU and
// a quarter of the machine's (docs/benchmarks.md). The mounts it keeps are
// the few of type cgroup, and it assumes, as the daemon does, that they do
// not change once the host has booted.
package cgroupv1mounts

import (
	"encoding/json"
	"path/filepath"
	"sync"
	_ "unsafe" // go:linkname

	"github.com/moby/sys/mountinfo"
	"github.com/opencontainers/cgroups"
)

// The cgroups package's cache of the cgroup mounts (its v1_utils.go, as of
// opencontainers/cgroups v0.1.0): readCgroupMountinfo fills it once, with
// mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup")). A linkname of a
// variable declares it as well as names it: with a version that renamed
// them, these link all the same, as this package's alone, and seed
// nothing; Seed checks that libcontainer's reader returns what it wrote.
//
//go:linkname readMountinfoOnce github.com/opencontainers/cgroups.readMountinfoOnce
var readMountinfoOnce sync.Once

//go:linkname cgroupMountinfo github.com/opencontainers/cgroups.cgroupMountinfo
var cgroupMountinfo []*mountinfo.Info

// readCgroupMountinfo is the cgroups package's reader of that cache. A
// function without a body can only be a name for another's: a version of
// the package without it fails to link.
//
//go:linkname readCgroupMountinfo github.com/opencontainers/cgroups.readCgroupMountinfo
func readCgroupMountinfo() ([]*mountinfo.Info, error)

// Env carries the mounts from the daemon to a monitor, as JSON.
const Env = "STATICPODD_CGROUP_V1_MOUNTS"

// maxMounts bounds what Seed takes: a host has one mount per hierarchy,
// about a dozen.
const maxMounts = 64

// maxEncoded bounds Env's value: execve(2) refuses a string of the
// environment longer than 128 KiB, and a monitor that cannot be started
// starts no container. A host's dozen hierarchies take 2 KB; mountpoints
// near PATH_MAX (a hierarchy bound into a pod's volume with bidirectional
// propagation shows on the host) take more, and then each monitor reads
// the mount table itself, as without Env.
const maxEncoded = 64 << 10

// Encoded is this host's cgroup v1 mounts as libcontainer reads them, in
// Env's form, or "" on a cgroup v2 host or when they cannot be read.
var Encoded = sync.OnceValue(func() string {
	if cgroups.IsCgroup2UnifiedMode() {
		return ""
	}
	mounts, err := mountinfo.GetMounts(mountinfo.FSTypeFilter("cgroup"))
	if err != nil || len(mounts) == 0 || len(mounts) > maxMounts {
		return ""
	}
	b, err := json.Marshal(mounts)
	if err != nil || len(b) > maxEncoded {
		return ""
	}
	return string(b)
})

// Seed makes the mounts Encoded gave in the daemon the cgroup mounts this
// process's libcontainer knows, unless it read its own already. It refuses
// anything but a list of cgroup mounts at absolute, clean paths, and says
// whether it took it.
func Seed(encoded string) bool {
	var mounts []*mountinfo.Info
	if len(encoded) > maxEncoded {
		return false
	}
	if err := json.Unmarshal([]byte(encoded), &mounts); err != nil || len(mounts) == 0 || len(mounts) > maxMounts {
		return false
	}
	for _, m := range mounts {
		if m == nil || m.FSType != "cgroup" || !filepath.IsAbs(m.Mountpoint) || filepath.Clean(m.Mountpoint) != m.Mountpoint {
			return false
		}
	}
	took := false
	readMountinfoOnce.Do(func() {
		cgroupMountinfo, took = mounts, true
	})
	if !took {
		return false
	}
	// Taken by the cache libcontainer reads, not by variables of this
	// package's alone (which would have the reader read the mount table
	// now, as it would have without the seed).
	got, err := readCgroupMountinfo()
	return err == nil && len(got) == len(mounts) && &got[0] == &mounts[0]
}
