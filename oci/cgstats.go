package oci

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// cgDirs names the directories of one cgroup: on cgroup v1 one per
// controller (memory, cpuacct, pids), on v2 the one unified directory, as
// libcontainer's managers' GetPaths return them (v2: key "").
type cgDirs map[string]string

func (d cgDirs) unified() bool { _, ok := d[""]; return ok }

// readUsage reads what a cgroup measures. Working set is usage −
// inactive_file, as cadvisor computes it for the kubelet (v1: the
// hierarchical total_inactive_file; v2: inactive_file); RSS is v1's
// total_rss and v2's anon. A controller that is missing leaves its values 0;
// a cgroup that does not exist is an error wrapping os.ErrNotExist.
func readUsage(d cgDirs) (podspec.Usage, error) {
	var u podspec.Usage
	var errs []error
	keep := func(err error) {
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if dir, ok := d[""]; ok {
		if _, err := os.Stat(dir); err != nil {
			return u, err
		}
		var err error
		u.MemoryUsage, err = readUint(dir, "memory.current")
		keep(err)
		stat, err := readFlat(dir, "memory.stat")
		keep(err)
		u.MemoryRSS = stat["anon"]
		u.MemoryWorkingSet = workingSet(u.MemoryUsage, stat["inactive_file"])
		cpu, err := readFlat(dir, "cpu.stat")
		keep(err)
		u.CPUUsageNanos = cpu["usage_usec"] * 1000
		u.Pids, err = readUint(dir, "pids.current")
		keep(err)
		return u, errors.Join(errs...)
	}
	if dir := d["memory"]; dir != "" {
		if _, err := os.Stat(dir); err != nil {
			return u, err
		}
		var err error
		u.MemoryUsage, err = readUint(dir, "memory.usage_in_bytes")
		keep(err)
		stat, err := readFlat(dir, "memory.stat")
		keep(err)
		u.MemoryRSS = stat["total_rss"]
		u.MemoryWorkingSet = workingSet(u.MemoryUsage, stat["total_inactive_file"])
	}
	if dir := d["cpuacct"]; dir != "" {
		var err error
		u.CPUUsageNanos, err = readUint(dir, "cpuacct.usage")
		keep(err)
	}
	if dir := d["pids"]; dir != "" {
		var err error
		u.Pids, err = readUint(dir, "pids.current")
		keep(err)
	}
	return u, errors.Join(errs...)
}

// workingSet is cadvisor's: usage less inactive file pages, never negative.
func workingSet(usage, inactiveFile uint64) uint64 {
	if inactiveFile >= usage {
		return 0
	}
	return usage - inactiveFile
}

// readLimits reads a cgroup's memory limit and process limit; 0 = none.
func readLimits(d cgDirs) (memory, pids uint64, err error) {
	var errs []error
	memFile, memDir, pidsDir := "memory.limit_in_bytes", d["memory"], d["pids"]
	if dir, ok := d[""]; ok {
		memFile, memDir, pidsDir = "memory.max", dir, dir
	}
	if memDir != "" {
		memory, err = readUint(memDir, memFile)
		errs = append(errs, err)
		// v1 says "no limit" with a huge page-aligned number.
		if memory >= 1<<62 {
			memory = 0
		}
	}
	if pidsDir != "" {
		pids, err = readUint(pidsDir, "pids.max")
		errs = append(errs, err)
	}
	return memory, pids, errors.Join(errs...)
}

// readUint reads a file holding one number; "max" is 0 (no limit).
func readUint(dir, file string) (uint64, error) {
	b, err := os.ReadFile(filepath.Join(dir, file))
	if err != nil {
		return 0, err
	}
	s := string(bytes.TrimSpace(b))
	if s == "max" {
		return 0, nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", filepath.Join(dir, file), err)
	}
	return n, nil
}

// readFlat reads a flat-keyed file ("key value" lines) such as memory.stat.
func readFlat(dir, file string) (map[string]uint64, error) {
	f, err := os.Open(filepath.Join(dir, file))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	m := map[string]uint64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			m[k] = n
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, file), err)
	}
	return m, nil
}
