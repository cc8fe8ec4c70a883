// Package stats measures what the node, its pods and their containers use,
// as the kubelet's cadvisor does: cgroup files (usage, working set, limits),
// /proc and statfs for the node, network device counters, log and writable
// layer sizes. It reads the host only; package oci, which knows the pods and
// containers, puts the summary together.
package stats

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// Dirs names the directories of one cgroup: on cgroup v1 one per
// controller (memory, cpuacct, pids), on v2 the one unified directory, as
// libcontainer's managers' GetPaths return them (v2: key "").
type Dirs map[string]string

func (d Dirs) Unified() bool { _, ok := d[""]; return ok }

// ReadUsage reads what a cgroup measures. Working set is usage −
// inactive_file, as cadvisor computes it for the kubelet (v1: the
// hierarchical total_inactive_file; v2: inactive_file); RSS is v1's
// total_rss and v2's anon, cache v1's total_cache and v2's file, as
// cadvisor reads them; the CFS counters are cpu.stat's. A controller that is missing leaves its values 0;
// a cgroup that does not exist is an error wrapping os.ErrNotExist.
func ReadUsage(d Dirs) (podspec.Usage, error) {
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
		stat, err := readFlat(dir, "memory.stat", "anon", "inactive_file", "file")
		keep(err)
		u.MemoryRSS, u.MemoryCache = stat[0], stat[2]
		u.MemoryWorkingSet = workingSet(u.MemoryUsage, stat[1])
		cpu, err := readFlat(dir, "cpu.stat", "usage_usec", "nr_periods", "nr_throttled", "throttled_usec")
		keep(err)
		u.CPUUsageNanos = cpu[0] * 1000
		u.CPUPeriods, u.CPUThrottledPeriods, u.CPUThrottledNanos = cpu[1], cpu[2], cpu[3]*1000
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
		stat, err := readFlat(dir, "memory.stat", "total_rss", "total_inactive_file", "total_cache")
		keep(err)
		u.MemoryRSS, u.MemoryCache = stat[0], stat[2]
		u.MemoryWorkingSet = workingSet(u.MemoryUsage, stat[1])
	}
	if dir := d["cpuacct"]; dir != "" {
		var err error
		u.CPUUsageNanos, err = readUint(dir, "cpuacct.usage")
		keep(err)
	}
	if dir := d["cpu"]; dir != "" {
		cpu, err := readFlat(dir, "cpu.stat", "nr_periods", "nr_throttled", "throttled_time")
		keep(err)
		u.CPUPeriods, u.CPUThrottledPeriods, u.CPUThrottledNanos = cpu[0], cpu[1], cpu[2]
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

// ReadLimits reads a cgroup's memory limit and process limit; 0 = none.
func ReadLimits(d Dirs) (memory, pids uint64, err error) {
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
func readUint(dir, file string) (n uint64, err error) {
	err = readSmall(filepath.Join(dir, file), func(b []byte) error {
		b = bytes.TrimSpace(b)
		if string(b) == "max" {
			return nil
		}
		n, err = strconv.ParseUint(string(b), 10, 64)
		return err
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// flat is what readFlat reads: the values of the keys asked for, in order.
type flat [4]uint64

// readFlat reads the values of keys (at most len(flat)) from a flat-keyed
// file ("key value" lines) such as memory.stat; a key the file lacks is 0.
func readFlat(dir, file string, keys ...string) (v flat, err error) {
	err = readSmall(filepath.Join(dir, file), func(b []byte) error {
		for len(b) > 0 {
			line := b
			if i := bytes.IndexByte(b, '\n'); i >= 0 {
				line, b = b[:i], b[i+1:]
			} else {
				b = nil
			}
			k, val, ok := bytes.Cut(line, []byte{' '})
			if !ok {
				continue
			}
			for i, key := range keys[:min(len(keys), len(v))] {
				if string(k) == key {
					if n, err := strconv.ParseUint(string(val), 10, 64); err == nil {
						v[i] = n
					}
				}
			}
		}
		return nil
	})
	return v, err
}

// smallFileMax bounds what readSmall reads: cgroup and /proc files of a few
// KiB (v1's memory.stat is the largest, about 1.5 KiB).
const smallFileMax = 16 << 10

// readBufs are readSmall's spare buffers (one byte more than it reads, to
// tell a file of smallFileMax bytes from a larger one): the housekeeping
// reads every pod's and container's cgroup files every few seconds, and a
// buffer each was most of what an idle daemon allocated. Two are kept
// whatever the collector does (a sync.Pool dropped them at every other
// cycle, and the next housekeeping made them again); more readers at once
// make their own, and drop them.
var readBufs = make(chan *[smallFileMax + 1]byte, 2)

func getReadBuf() *[smallFileMax + 1]byte {
	select {
	case b := <-readBufs:
		return b
	default:
		return new([smallFileMax + 1]byte)
	}
}

func putReadBuf(b *[smallFileMax + 1]byte) {
	select {
	case readBufs <- b:
	default:
	}
}

// readSmall calls use with the content of path, which use must not keep.
// An error names the path; a missing file wraps os.ErrNotExist.
func readSmall(path string, use func([]byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := getReadBuf()
	defer putReadBuf(buf)
	n, err := io.ReadFull(f, buf[:])
	switch {
	case err == nil:
		return fmt.Errorf("%s: larger than %d bytes", path, smallFileMax)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
	default:
		return err // a *PathError naming the file
	}
	if err := use(buf[:n]); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
