//go:build linux && cgo

package oci

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"

	"github.com/opencontainers/cgroups"
)

// attachWarmer makes the kernel's next cgroup attach cheap.
//
// Every write to a cgroup.procs file takes the kernel's cgroup_threadgroup_rwsem
// for writing, and the first such write after a quiet spell waits for an RCU
// grace period (5-15 ms measured here) while the semaphore switches to its
// writer-friendly mode; writes in the next few tens of milliseconds are cheap.
// libcontainer attaches a container's init to its cgroup on the critical path
// of every start (cgroup manager Apply, before the init may go on), so the
// daemon pays that wait in the background while it prepares the container:
// it writes its own pid to the cgroup.procs of the cgroup it is already in,
// which moves nothing. Forks and exits elsewhere are not held up meanwhile:
// readers of the semaphore only wait while a writer holds it, not while one
// waits for the grace period.
type attachWarmer struct {
	once     sync.Once
	procs    string // the daemon's own cgroup.procs; "" if unknown
	inFlight atomic.Bool
	wg       sync.WaitGroup // the attach under way
}

// wait returns once no attach is under way.
func (w *attachWarmer) wait() { w.wg.Wait() }

// warm starts a no-op attach in the background unless one is under way.
func (w *attachWarmer) warm() {
	w.once.Do(func() {
		if p, err := ownCgroupProcs(); err == nil {
			w.procs = p
		}
	})
	if w.procs == "" || !w.inFlight.CompareAndSwap(false, true) {
		return
	}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer w.inFlight.Store(false)
		// A failure only means the container's attach is not sped up.
		_ = os.WriteFile(w.procs, []byte(strconv.Itoa(os.Getpid())), 0)
	}()
}

// ownCgroupProcs returns the cgroup.procs file of this process's cgroup.
func ownCgroupProcs() (string, error) {
	if cgroups.IsCgroup2UnifiedMode() {
		paths, err := cgroups.ParseCgroupFile("/proc/self/cgroup")
		if err != nil {
			return "", err
		}
		p, ok := paths[""]
		if !ok {
			return "", fmt.Errorf("no cgroup v2 path in /proc/self/cgroup")
		}
		return filepath.Join("/sys/fs/cgroup", p, "cgroup.procs"), nil
	}
	dir, err := cgroups.GetOwnCgroupPath("pids")
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "cgroup.procs"), nil
}
