//go:build linux && cgo

package monitor

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencontainers/runc/libcontainer/configs"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
)

var rlimitTypes = map[string]int{
	"RLIMIT_AS":         unix.RLIMIT_AS,
	"RLIMIT_CORE":       unix.RLIMIT_CORE,
	"RLIMIT_CPU":        unix.RLIMIT_CPU,
	"RLIMIT_DATA":       unix.RLIMIT_DATA,
	"RLIMIT_FSIZE":      unix.RLIMIT_FSIZE,
	"RLIMIT_LOCKS":      unix.RLIMIT_LOCKS,
	"RLIMIT_MEMLOCK":    unix.RLIMIT_MEMLOCK,
	"RLIMIT_MSGQUEUE":   unix.RLIMIT_MSGQUEUE,
	"RLIMIT_NICE":       unix.RLIMIT_NICE,
	"RLIMIT_NOFILE":     unix.RLIMIT_NOFILE,
	"RLIMIT_NPROC":      unix.RLIMIT_NPROC,
	"RLIMIT_RSS":        unix.RLIMIT_RSS,
	"RLIMIT_RTPRIO":     unix.RLIMIT_RTPRIO,
	"RLIMIT_RTTIME":     unix.RLIMIT_RTTIME,
	"RLIMIT_SIGPENDING": unix.RLIMIT_SIGPENDING,
	"RLIMIT_STACK":      unix.RLIMIT_STACK,
}

// clampRlimits converts spec rlimits, lowering each to this process's hard
// limit: without CAP_SYS_RESOURCE a higher one fails the container's start.
func clampRlimits(in []specs.POSIXRlimit) ([]configs.Rlimit, error) {
	var out []configs.Rlimit
	for _, l := range in {
		typ, ok := rlimitTypes[l.Type]
		if !ok {
			return nil, fmt.Errorf("unknown rlimit %q", l.Type)
		}
		var own unix.Rlimit
		if err := unix.Getrlimit(typ, &own); err != nil {
			return nil, fmt.Errorf("getrlimit %s: %w", l.Type, err)
		}
		hard, soft := min(l.Hard, own.Max), l.Soft
		soft = min(soft, hard)
		out = append(out, configs.Rlimit{Type: typ, Hard: hard, Soft: soft})
	}
	return out, nil
}

// oomKilled reports whether the kernel's OOM killer killed a process in the
// container's memory cgroup (v1 memory.oom_control, v2 memory.events).
func oomKilled(paths map[string]string) bool {
	for _, p := range []string{
		filepath.Join(paths["memory"], "memory.oom_control"),
		filepath.Join(paths[""], "memory.events"),
	} {
		if !filepath.IsAbs(p) || filepath.Dir(p) == "/" {
			continue
		}
		if n, ok := readCounter(p, "oom_kill"); ok {
			return n > 0
		}
	}
	return false
}

// podOOMKills is the oom_kill count of the parent (the pod's cgroup) of a
// cgroup v2 container cgroup, which counts its children's kills too
// (memory.events is hierarchical); ok is false on v1 or when unreadable.
func podOOMKills(paths map[string]string) (n uint64, ok bool) {
	dir := paths[""]
	if !filepath.IsAbs(dir) || filepath.Dir(dir) == "/" {
		return 0, false
	}
	return readCounter(filepath.Join(filepath.Dir(dir), "memory.events"), "oom_kill")
}

// oomKilledSince is oomKilled for a container that died of signal sig. Under
// the systemd cgroup driver systemd removes a container's scope, and its
// memory.events, as soon as its last process is gone, which can be before the
// monitor reads it: then a SIGKILL while the pod's count (podOOMKills, podBefore
// at the start) went up is taken for the OOM killer's.
func oomKilledSince(paths map[string]string, podBefore uint64, podOK bool, sig int) bool {
	if v1 := paths["memory"]; v1 != "" {
		// cgroup v1, hybrid included: there paths[""] is the unified
		// hierarchy, which has no memory controller and no memory.events.
		return oomKilled(paths)
	}
	if _, err := os.Stat(filepath.Join(paths[""], "memory.events")); paths[""] == "" || err == nil {
		return oomKilled(paths)
	}
	if !podOK || sig != int(unix.SIGKILL) {
		return false
	}
	n, ok := podOOMKills(paths)
	return ok && n > podBefore
}

// readCounter reads the value of key from a flat-keyed cgroup file.
func readCounter(path, key string) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && k == key {
			n, err := strconv.ParseUint(v, 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}
