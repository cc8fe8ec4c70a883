package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Proc is a process of the control plane.
type Proc struct {
	PID int
	// Ticks is when it started, in clock ticks since boot (field 22 of
	// /proc/<pid>/stat): exact to a tick, and comparable with any other
	// process's.
	Ticks uint64
}

// ClockTick is the length of a tick of Proc.Ticks in seconds (USER_HZ, 100 on
// Linux everywhere).
const ClockTick = 0.01

// Procs returns the processes in the namespace whose comm is one of the
// components', by comm ("kube-controller" for kube-controller-manager).
func (n *Netns) Procs() (map[string]Proc, error) {
	ino, err := n.Inode()
	if err != nil {
		return nil, err
	}
	comms := map[string]bool{}
	for _, c := range Components {
		comms[c.Comm] = true
	}
	procs := map[string]Proc{}
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "comm"))
		if err != nil || !comms[strings.TrimSpace(string(b))] {
			continue
		}
		comm := strings.TrimSpace(string(b))
		link, err := os.Readlink(filepath.Join(dir, "ns", "net"))
		if err != nil || link != fmt.Sprintf("net:[%d]", ino) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(dir))
		p, err := ProcOf(pid)
		if err != nil {
			continue // gone meanwhile
		}
		procs[comm] = p
	}
	return procs, nil
}

// ProcOf reads the start time of pid.
func ProcOf(pid int) (Proc, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Proc{}, err
	}
	// The fields after comm, which may hold spaces and parentheses: state is
	// field 3, starttime field 22.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	f := strings.Fields(s[i+1:])
	if i < 0 || len(f) < 20 {
		return Proc{}, fmt.Errorf("parse /proc/%d/stat", pid)
	}
	if f[0] == "Z" {
		return Proc{}, fmt.Errorf("process %d is a zombie", pid)
	}
	ticks, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return Proc{}, fmt.Errorf("parse /proc/%d/stat: %w", pid, err)
	}
	return Proc{PID: pid, Ticks: ticks}, nil
}
