//go:build linux && cgo

package monitor

import (
	"bytes"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/opencontainers/runc/libcontainer/system"
	"golang.org/x/sys/unix"
)

// strayAfter is how long a child of the exec server that nothing waits for
// may stay a zombie before the server reaps it. The children libcontainer
// waits for are reaped at once: its waits are under way, or a few
// instructions away, when they exit.
const strayAfter = 2 * time.Second

// strayAfterRun is how long a zombie child may wait for an exec's start that
// was under way when it was first seen (and may be its own, still to wait
// for it) before the server reaps it all the same: a start stuck that long
// has lost its process anyway, and others' containers must not wait on it.
const strayAfterRun = 30 * time.Second

// strayReaper reaps the exec server's zombie children that nothing waits
// for. libcontainer's setns init is three processes, each a child of the
// server (the later two cloned with CLONE_PARENT); when the start fails
// before the first has told the server the others' pids (a container whose
// init exits meanwhile: its PID namespace kills the last one, which was in
// it), libcontainer waits for the first only. The last stays a zombie of the
// server, and a PID namespace's init does not finish exiting while a
// process of the namespace waits to be reaped: the container's exit would
// wait, seen by no one, for the server's own exit (found by the chaos soak:
// a stopped pod's container outlived SIGTERM and SIGKILL for a minute).
type strayReaper struct {
	after time.Duration

	mu     sync.Mutex
	waited map[int]bool // pids serveExec waits for
	// The execs' starts (ctr.Run until serveExec marks its pid), by
	// number: a start's processes, the one serveExec is to wait for
	// among them, may exit before it returns, and are not strays until
	// it has.
	started  uint64
	starting map[uint64]bool

	seen map[int]zombie // the loop's only
}

// zombie is a child seen a zombie: its start time (a pid reused is another
// process), when it was first seen so, and the last exec start begun then
// (a start begun later did not make it).
type zombie struct {
	start uint64
	at    time.Time
	run   uint64
}

func newStrayReaper(after time.Duration) *strayReaper {
	return &strayReaper{after: after, waited: map[int]bool{},
		starting: map[uint64]bool{}, seen: map[int]zombie{}}
}

// begin marks an exec's start under way, until end: the zombies seen
// meanwhile may be its own, and are left to it.
func (r *strayReaper) begin() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.started++
	r.starting[r.started] = true
	return r.started
}

func (r *strayReaper) end(run uint64) {
	r.mu.Lock()
	delete(r.starting, run)
	r.mu.Unlock()
}

// reapable reports whether z, unwaited for, is a stray to reap at now.
func (r *strayReaper) reapable(z zombie, now time.Time) bool {
	age := now.Sub(z.at)
	if age < r.after {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if age < strayAfterRun {
		for run := range r.starting {
			if run <= z.run {
				return false
			}
		}
	}
	return true
}

// lastStarted is the number of the last exec start begun.
func (r *strayReaper) lastStarted() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.started
}

// wait marks pid as waited for, until done.
func (r *strayReaper) wait(pid int) {
	r.mu.Lock()
	r.waited[pid] = true
	r.mu.Unlock()
}

func (r *strayReaper) done(pid int) {
	r.mu.Lock()
	delete(r.waited, pid)
	r.mu.Unlock()
}

func (r *strayReaper) isWaited(pid int) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.waited[pid]
}

// run looks for strays at once, at every SIGCHLD, and again while one is
// pending, until stop is closed (never, for nil). The first look is for the
// children that exited before SIGCHLD was asked for: theirs came unseen.
func (r *strayReaper) run(stop <-chan struct{}) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, unix.SIGCHLD)
	defer signal.Stop(sig)
	again := time.NewTimer(time.Hour)
	again.Stop()
	for {
		if r.sweep(time.Now()) {
			again.Reset(r.after)
		}
		select {
		case <-sig:
		case <-again.C:
		case <-stop:
			return
		}
	}
}

// sweep reaps the zombie children nothing waits for that have been zombies
// for r.after, and reports whether others are pending.
func (r *strayReaper) sweep(now time.Time) bool {
	zombies := map[int]uint64{}
	for _, pid := range children() {
		// The waited ones first: they are most children (the execs'
		// processes), and reading one's stat costs some 20 µs.
		if r.isWaited(pid) {
			continue
		}
		st, err := system.Stat(pid)
		if err != nil || st.State != system.Zombie {
			continue
		}
		zombies[pid] = st.StartTime
	}
	for pid, z := range r.seen {
		if start, ok := zombies[pid]; !ok || start != z.start {
			delete(r.seen, pid)
		}
	}
	run := r.lastStarted()
	for pid, start := range zombies {
		z, ok := r.seen[pid]
		switch {
		case !ok:
			r.seen[pid] = zombie{start: start, at: now, run: run}
		case r.reapable(z, now) && !r.isWaited(pid):
			_, _ = unix.Wait4(pid, nil, unix.WNOHANG, nil)
			delete(r.seen, pid)
		}
	}
	return len(r.seen) > 0
}

// children returns this process's children: from each thread's children
// file, or, on a kernel without them, from every process's parent.
func children() []int {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return nil
	}
	var pids []int
	for _, t := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "children"))
		if os.IsNotExist(err) {
			return childrenByParent()
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// childrenByParent scans every process for those whose parent is this one.
func childrenByParent() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppid, _, ok := ProcParent(pid); ok && ppid == self {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ProcParent reads pid's parent and state from /proc/<pid>/stat.
func ProcParent(pid int) (ppid int, state byte, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, false
	}
	// The fields after the command, which is in parentheses: state, ppid.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 2 || len(f[0]) != 1 {
		return 0, 0, false
	}
	ppid, err = strconv.Atoi(f[1])
	return ppid, f[0][0], err == nil
}
