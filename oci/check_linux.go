//go:build linux && cgo

package oci

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/opencontainers/cgroups"

	"github.com/staticpodd/staticpodd/agent/host"
	"github.com/staticpodd/staticpodd/oci/stats"
)

// checks are the start-up checks, in order: each is one clear line when it
// fails. The daemon runs them all before any pod starts and exits on a
// failure; staticpodd check runs them alone.
var checks = []check{
	{"proc-sys", checkProcSys},
	{"cgroup-controllers", checkControllers},
	{"cgroup-driver", checkDriver},
	{"cgroup-root", checkCgroupRoot},
	{"swap", checkSwap},
}

// Check runs every start-up check and returns one error per failure, each
// naming its check.
func Check(cfg CheckConfig) []error {
	var errs []error
	for _, c := range checks {
		if err := c.run(cfg); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errs
}

// checkProcSys: /proc and /sys are mounted and readable (stats, mounts,
// cgroups and namespaces all come from them).
func checkProcSys(CheckConfig) error {
	var errs []error
	for _, f := range []string{"/proc/self/mountinfo", host.Meminfo, "/proc/sys/kernel/pid_max"} {
		var err error
		if f == host.Meminfo {
			_, err = host.ReadMemory(f) // what nodeStats reads from it
		} else {
			_, err = os.ReadFile(f)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("cannot read %s: %w", f, err))
		}
	}
	if _, err := os.ReadDir(stats.CgroupRootDir); err != nil {
		errs = append(errs, fmt.Errorf("cannot read %s: %w", stats.CgroupRootDir, err))
	}
	return errors.Join(errs...)
}

// requiredV1 are the cgroup v1 controllers pods need: the kubelet's cpu,
// cpuacct, cpuset and memory, and pids (podPidsLimit, pid.available),
// devices (device rules) and freezer (removing a pod's cgroup).
var requiredV1 = []string{"cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer"}

// requiredV2 are the cgroup v2 controllers pods need, enabled for the
// daemon's subtree (delegated, under systemd).
var requiredV2 = []string{"cpu", "cpuset", "memory", "pids"}

// checkControllers: the controllers pods need are mounted (v1), or can be
// had where pod cgroups go (v2): the kernel has them (the root's
// cgroup.controllers), and every cgroup from the root down to cgroupRoot
// (as far as it exists) either passes them on already (cgroup.subtree_control)
// or can be made to, which a cgroup with processes of its own cannot (the
// "no internal processes" rule: a systemd unit's cgroup, unless the unit
// has Delegate=yes and the daemon runs in a leaf of it).
func checkControllers(cfg CheckConfig) error {
	if cgroups.IsCgroup2UnifiedMode() {
		return checkControllersV2(stats.CgroupRootDir, cfg)
	}
	var missing []string
	for _, c := range requiredV1 {
		if _, err := cgroups.FindCgroupMountpoint("", c); err != nil {
			missing = append(missing, c)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("cgroup v1 subsystems not mounted: %s", strings.Join(missing, ", "))
	}
	return nil
}

// checkControllersV2 checks the v2 hierarchy mounted at base.
func checkControllersV2(base string, cfg CheckConfig) error {
	root := cfg.CgroupRoot
	if root == "" {
		root = DefaultCgroupRoot
	}
	b, err := os.ReadFile(filepath.Join(base, "cgroup.controllers"))
	if err != nil {
		return fmt.Errorf("cgroup v2: %w", err)
	}
	if missing := lacking(string(b)); len(missing) > 0 {
		return fmt.Errorf("cgroup v2 controllers %s are not available on this host", strings.Join(missing, ", "))
	}
	// Every existing cgroup on the way, root excluded, its children included
	// down to cgroupRoot: each must pass the controllers on.
	var path []string
	for dir := filepath.Join(base, root); dir != base && dir != "/"; dir = filepath.Dir(dir) {
		path = append([]string{dir}, path...)
	}
	for _, dir := range path {
		if _, err := os.Stat(dir); err != nil {
			break // made by the runtime, with the controllers on
		}
		sub, err := os.ReadFile(filepath.Join(dir, "cgroup.subtree_control"))
		if err != nil {
			return fmt.Errorf("cgroup v2: %w", err)
		}
		missing := lacking(string(sub))
		if len(missing) == 0 {
			continue
		}
		if procs, _ := os.ReadFile(filepath.Join(dir, "cgroup.procs")); len(strings.TrimSpace(string(procs))) > 0 {
			return fmt.Errorf("cgroup v2 controllers %s cannot be given to pod cgroups under %s: it has processes of its own (cgroupRoot %s; under systemd, Delegate=yes and the daemon in a leaf of the unit's cgroup)",
				strings.Join(missing, ", "), strings.TrimPrefix(dir, base), root)
		}
	}
	return nil
}

// lacking are the required v2 controllers not in a controllers list.
func lacking(list string) []string {
	have := strings.Fields(list)
	var missing []string
	for _, c := range requiredV2 {
		if !slices.Contains(have, c) {
			missing = append(missing, c)
		}
	}
	return missing
}

// checkDriver: the systemd cgroup driver needs systemd; cgroupfs is fine
// anywhere (under systemd, in the daemon's delegated subtree).
func checkDriver(cfg CheckConfig) error {
	if cfg.CgroupDriver == "" {
		return nil
	}
	return CheckCgroupDriver(cfg.CgroupDriver)
}

// checkCgroupRoot: a pod cgroup can be made under cgroupRoot, in every
// hierarchy pods use: a probe cgroup is made and removed.
func checkCgroupRoot(cfg CheckConfig) error {
	root := cfg.CgroupRoot
	if root == "" {
		root = DefaultCgroupRoot
	}
	probe := filepath.Join(root, "staticpodd-check-"+strconv.Itoa(os.Getpid()))
	dirs := stats.DirsOf(probe)
	if !dirs.Unified() {
		for _, c := range requiredV1 {
			if mnt, err := cgroups.FindCgroupMountpoint("", c); err == nil {
				dirs[c] = filepath.Join(mnt, probe)
			}
		}
	}
	var errs []error
	for ctrl, dir := range dirs {
		_, err := os.Stat(filepath.Dir(dir))
		made := errors.Is(err, os.ErrNotExist)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			name := ctrl
			if name == "" {
				name = "cgroup v2"
			}
			errs = append(errs, fmt.Errorf("cgroupRoot %s is not writable (%s): %w", root, name, err))
			continue
		}
		_ = os.Remove(dir)
		if made {
			_ = os.Remove(filepath.Dir(dir)) // the check leaves nothing
		}
	}
	if len(errs) > 1 {
		return errs[0] // one line: the first hierarchy says it
	}
	return errors.Join(errs...)
}

// checkSwap is the kubelet's: swap that is on fails the start when
// failSwapOn (the default).
func checkSwap(cfg CheckConfig) error {
	on, err := swapOn()
	if err != nil {
		return fmt.Errorf("failed to determine if swap is on: %w", err)
	}
	if on && cfg.FailSwapOn {
		return errors.New("running with swap on is not supported, please disable swap or set failSwapOn to false")
	}
	return nil
}

// swapOn reports whether /proc/swaps lists a swap device or file (the
// kubelet's swap.IsSwapOn).
func swapOn() (bool, error) {
	f, err := os.Open("/proc/swaps")
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return false, nil // no swap support
		}
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	lines := 0
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) != "" {
			lines++
		}
	}
	return lines > 1, sc.Err()
}
