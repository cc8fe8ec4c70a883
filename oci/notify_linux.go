//go:build linux && cgo

package oci

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/oci/stats"
)

// MemoryNotifier wakes the eviction manager when the node's memory usage
// crosses a threshold, between its polls: on cgroup v1 with the memory
// cgroup's threshold notification (an eventfd registered in
// cgroup.event_control on memory.usage_in_bytes, as the kubelet's
// threshold_notifier_linux.go), on cgroup v2, which has none, with a PSI
// trigger on memory stalls (the node cgroup's memory.pressure, else
// /proc/pressure/memory). The node is the root cgroup, or the test-only
// NodeCgroup.
type MemoryNotifier struct {
	events chan struct{}
	dir    string // the memory cgroup's directory
	v1     bool

	mu     sync.Mutex // guards the fields below
	efd    *os.File   // v1: the armed eventfd; nil until SetThreshold
	closed bool
	stop   chan struct{} // closes the PSI poller
}

// PSI trigger: a wake-up when tasks stalled on memory for 100 ms within 2 s.
// A window of 2 s (a multiple of it) is what the kernel allows without
// CAP_SYS_RESOURCE, which a daemon in a container may lack.
const psiTrigger = "some 100000 2000000"

// NewMemoryNotifier returns the node's memory notifier. On v2 it is armed at
// once; on v1 by SetThreshold.
func (r *Runtime) NewMemoryNotifier() (*MemoryNotifier, error) {
	cg := r.cfg.NodeCgroup
	if cg == "" {
		cg = "/"
	}
	d := stats.DirsOf(cg)
	n := &MemoryNotifier{events: make(chan struct{}, 1), stop: make(chan struct{})}
	if dir, ok := d[""]; ok {
		n.dir = dir
		p := filepath.Join(dir, "memory.pressure")
		if _, err := os.Stat(p); err != nil || cg == "/" {
			p = "/proc/pressure/memory"
		}
		f, err := armPSI(p)
		if err != nil {
			return nil, err
		}
		go n.pollPSI(f)
		return n, nil
	}
	if d["memory"] == "" {
		return nil, errors.New("memory notifier: no memory cgroup")
	}
	n.dir, n.v1 = d["memory"], true
	return n, nil
}

// armPSI opens a PSI file (memory.pressure, /proc/pressure/memory) with
// the trigger written: POLLPRI on it when the trigger fires.
func armPSI(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("memory notifier: %w", err)
	}
	// The kernel takes the last byte written for the string's end (the
	// documented example writes strlen + 1).
	if _, err := f.Write(append([]byte(psiTrigger), 0)); err != nil {
		f.Close()
		return nil, fmt.Errorf("memory notifier: PSI trigger on %s: %w", path, err)
	}
	return f, nil
}

// Events receives once per crossing (several crossings between two reads
// are one).
func (n *MemoryNotifier) Events() <-chan struct{} { return n.events }

// SetThreshold arms the notification for the node's memory usage (v1
// memory.usage_in_bytes) crossing bytes, replacing the one before. On v2 it
// does nothing: the PSI trigger stays.
func (n *MemoryNotifier) SetThreshold(bytes uint64) error {
	if !n.v1 {
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return errors.New("memory notifier closed")
	}
	efd, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		return fmt.Errorf("memory notifier: eventfd: %w", err)
	}
	ev := os.NewFile(uintptr(efd), "memory-threshold-eventfd")
	usage, err := os.Open(filepath.Join(n.dir, "memory.usage_in_bytes"))
	if err != nil {
		ev.Close()
		return fmt.Errorf("memory notifier: %w", err)
	}
	// The kernel keeps its own reference to the usage file's cgroup.
	defer usage.Close()
	ctl := filepath.Join(n.dir, "cgroup.event_control")
	line := strconv.Itoa(efd) + " " + strconv.Itoa(int(usage.Fd())) + " " + strconv.FormatUint(bytes, 10)
	if err := os.WriteFile(ctl, []byte(line), 0); err != nil {
		ev.Close()
		return fmt.Errorf("memory notifier: register in %s: %w", ctl, err)
	}
	if n.efd != nil {
		n.efd.Close() // unregisters the old threshold and ends its reader
	}
	n.efd = ev
	go n.readEventfd(ev)
	return nil
}

// readEventfd forwards each notification of ev until it is closed.
func (n *MemoryNotifier) readEventfd(ev *os.File) {
	buf := make([]byte, 8)
	for {
		if _, err := ev.Read(buf); err != nil {
			return
		}
		n.notify()
	}
}

// pollPSI forwards each PSI event of f until the notifier is closed.
func (n *MemoryNotifier) pollPSI(f *os.File) {
	defer f.Close()
	fds := []unix.PollFd{{Fd: int32(f.Fd()), Events: unix.POLLPRI}}
	for {
		select {
		case <-n.stop:
			return
		default:
		}
		k, err := unix.Poll(fds, 1000)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
		if k > 0 && fds[0].Revents&unix.POLLERR != 0 {
			return
		}
		if k > 0 && fds[0].Revents&unix.POLLPRI != 0 {
			n.notify()
		}
	}
}

func (n *MemoryNotifier) notify() {
	select {
	case n.events <- struct{}{}:
	default:
	}
}

// Close disarms the notifier.
func (n *MemoryNotifier) Close() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil
	}
	n.closed = true
	close(n.stop)
	if n.efd != nil {
		return n.efd.Close()
	}
	return nil
}
