package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// burstCPU counts the CPU a burst of pods costs, by cgroup, whatever else
// the machine runs: the daemon with the monitors it starts (moved into a
// cgroup of their own before the burst), and the pods' cgroups under the
// bench's cgroupRoot (libcontainer's inits, from the namespaces they make
// to their exec, and the containers' processes). Kernel work done for them
// in kernel threads is not counted.
type burstCPU struct {
	daemonCg string // the daemon's cgroup, in the CPU-accounting hierarchy
	podsCg   string
}

// benchPodsCgroup is the bench daemons' cgroupRoot (startDaemon).
const benchPodsCgroup = "staticpodd-bench"

// newBurstCPU moves the daemon pid (and so every monitor it starts after)
// into a cgroup of its own.
func newBurstCPU(pid int) (*burstCPU, error) {
	root := "/sys/fs/cgroup"
	if _, err := os.Stat("/sys/fs/cgroup/cpuacct/cpuacct.usage"); err == nil {
		root = "/sys/fs/cgroup/cpuacct"
	} else if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
		return nil, fmt.Errorf("no cpuacct hierarchy and no cgroup v2")
	}
	b := &burstCPU{daemonCg: filepath.Join(root, fmt.Sprintf("staticpodd-bench-daemon-%d", pid)), podsCg: filepath.Join(root, benchPodsCgroup)}
	if err := os.Mkdir(b.daemonCg, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(b.daemonCg, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		os.Remove(b.daemonCg)
		return nil, err
	}
	return b, nil
}

// usage is the CPU the two cgroups have used so far; a cgroup not there yet
// has used none.
func (b *burstCPU) usage() (daemon, pods time.Duration) {
	return cgroupCPU(b.daemonCg), cgroupCPU(b.podsCg)
}

// remove removes the daemon's cgroup once the daemon and its monitors are
// gone (a cgroup with processes cannot be removed: it is retried).
func (b *burstCPU) remove() {
	var err error
	for range 100 {
		if err = os.Remove(b.daemonCg); err == nil || os.IsNotExist(err) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "bench: cgroup %s left behind: %v\n", b.daemonCg, err)
}

func cgroupCPU(dir string) time.Duration {
	if b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage")); err == nil {
		ns, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return time.Duration(ns)
	}
	f, err := os.Open(filepath.Join(dir, "cpu.stat"))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "usage_usec "); ok {
			us, _ := strconv.ParseInt(v, 10, 64)
			return time.Duration(us) * time.Microsecond
		}
	}
	return 0
}
