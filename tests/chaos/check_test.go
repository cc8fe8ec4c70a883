package chaos

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// ckey is one container of one pod generation.
type ckey struct{ uid, container string }

// checker holds what the soak did (monitors killed) and what it saw
// (restart counts), and checks the invariants against both.
type checker struct {
	s *soak

	mu       sync.Mutex
	killed   map[ckey]int    // monitors the soak killed, by container
	restarts map[ckey]int32  // highest restart count seen
	samples  int             // of /pods
	procSeen int             // processes the process check looked at
	logLines int             // numbered log lines read back
	reused   map[string]bool // "name gen" of manifests added again after their removal
	// failedStarts counts the runs that failed to start (StartError, the
	// full disk's doing) by container, each seen once by its container ID.
	failedStarts map[ckey]int
	failedSeen   map[string]bool
	seen2        int // samples in which the process check found a pod twice
	// evicted holds the UIDs of pods seen evicted (or refused at
	// admission); out those seen so right now, so that each eviction
	// counts once.
	evicted   map[string]bool
	out       map[string]bool
	evictions int // pods evicted by a threshold
	refusals  int // pods refused at admission under pressure
	// bad holds the generations ("name gen") the rollout fault made never
	// Ready, and how; rollbacks counts the rollbacks it saw.
	bad       map[string]badness
	rollbacks int
}

// shapeOf is what generation gen of sp does: a generation whose container
// exits at once is a crashing one. c.mu is held.
func (c *checker) shapeOf(sp *spec, gen string) shape {
	if c.bad[sp.name+" "+gen] == exitsNow {
		return crashing
	}
	return sp.shape
}

// badGen records that generation gen of pod name is never Ready, and how,
// before its manifest is written.
func (c *checker) badGen(name string, gen int, how badness) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bad[fmt.Sprintf("%s %d", name, gen)] = how
}

func newChecker(s *soak) *checker {
	return &checker{s: s, killed: map[ckey]int{}, restarts: map[ckey]int32{}, reused: map[string]bool{},
		failedStarts: map[ckey]int{}, failedSeen: map[string]bool{}, evicted: map[string]bool{}, out: map[string]bool{},
		bad: map[string]badness{}}
}

// proc is one process of a container, as the process check saw it.
type proc struct {
	pid       int
	start     string // /proc/<pid>/stat starttime
	uid, cid  string // pod UID, container (cgroup) id
	container string
}

// procs lists the processes in the daemon's pod cgroups, each with the pod
// name, UID and container name from its own environment.
func procs(cgroupRoot string) map[string][]proc {
	out := map[string][]proc{}
	root := filepath.Join("/sys/fs/cgroup/pids", cgroupRoot)
	podDirs, _ := os.ReadDir(root)
	for _, pd := range podDirs {
		if !pd.IsDir() || !strings.HasPrefix(pd.Name(), "pod") {
			continue
		}
		cDirs, _ := os.ReadDir(filepath.Join(root, pd.Name()))
		for _, cd := range cDirs {
			if !cd.IsDir() {
				continue
			}
			b, _ := os.ReadFile(filepath.Join(root, pd.Name(), cd.Name(), "cgroup.procs"))
			for f := range strings.FieldsSeq(string(b)) {
				pid, _ := strconv.Atoi(f)
				env := environ(pid)
				if env["CHAOS_POD"] == "" {
					continue
				}
				out[env["CHAOS_POD"]] = append(out[env["CHAOS_POD"]], proc{pid: pid, start: startTime(pid),
					uid: env["POD_UID"], cid: cd.Name(), container: env["CHAOS_CONTAINER"]})
			}
		}
	}
	return out
}

func environ(pid int) map[string]string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	env := map[string]string{}
	for kv := range strings.SplitSeq(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

func startTime(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 || f[0] == "Z" {
		return ""
	}
	return f[19]
}

// alive reports whether p still runs: same pid, same start time.
func (p proc) alive() bool { return p.start != "" && startTime(p.pid) == p.start }

// sampleProcs checks that no pod runs two generations, and no container two
// runs, at one moment. A process seen alive before and after another was
// seen alive ran at the same time as it.
func (c *checker) sampleProcs() {
	all := procs(c.s.d.Cgroup)
	c.mu.Lock()
	for _, ps := range all {
		c.procSeen += len(ps)
	}
	c.mu.Unlock()
	for pod, ps := range all {
		for i, a := range ps {
			for _, b := range ps[i+1:] {
				if a.uid == b.uid && (a.cid == b.cid || a.container != b.container) {
					continue
				}
				if !a.alive() || !b.alive() {
					continue
				}
				c.mu.Lock()
				c.seen2++
				c.mu.Unlock()
				if a.uid != b.uid {
					c.s.failf("pod %s runs two generations at once: UID %s (pid %d, container %s) and UID %s (pid %d, container %s)",
						pod, a.uid, a.pid, a.cid, b.uid, b.pid, b.cid)
				} else {
					c.s.failf("container %s of pod %s (UID %s) runs twice at once: %s (pid %d) and %s (pid %d)",
						a.container, pod, a.uid, a.cid, a.pid, b.cid, b.pid)
				}
			}
		}
	}
}

// getPods is /pods, or an error while the daemon does not answer.
func getPods(d *testdaemon.Daemon) ([]v1.Pod, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", d.URL("/pods"), nil)
	resp, err := d.Client().Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		return nil, fmt.Errorf("decode /pods: %w", err)
	}
	return list.Items, nil
}

// statuses are a pod's init and regular container statuses.
func statuses(p *v1.Pod) []v1.ContainerStatus {
	return append(append([]v1.ContainerStatus{}, p.Status.InitContainerStatuses...), p.Status.ContainerStatuses...)
}

// sampleStatus checks what /pods says against what the soak did: restart
// counts never go down; a container that only ends when killed restarted no
// more often than the soak killed its monitor; every exit recorded has the
// code its container exits with (or 137 for a killed monitor).
func (c *checker) sampleStatus(pods []v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.samples++
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue // an old generation being stopped: its exits are the stop's
		}
		sp := c.s.byFullName(p.Name)
		if sp == nil {
			c.s.failf("/pods lists %s, which the soak never made", p.Name)
			continue
		}
		if c.checkEvicted(&p, sp) {
			continue // its containers were stopped by the eviction
		}
		reused := c.reused[fmt.Sprintf("%s %s", sp.name, listedGen(&p))]
		shape := c.shapeOf(sp, listedGen(&p))
		for _, cs := range statuses(&p) {
			k := ckey{string(p.UID), cs.Name}
			if last := cs.LastTerminationState.Terminated; last != nil && last.Reason == "StartError" && !c.failedSeen[last.ContainerID] {
				c.failedSeen[last.ContainerID] = true
				c.failedStarts[k]++
			}
			if reused {
				// A new life of the same UID starts its counts again.
				c.restarts[k] = cs.RestartCount
			}
			if cs.RestartCount < c.restarts[k] {
				c.s.failf("restart count of %s/%s (UID %s) went down from %d to %d", p.Name, cs.Name, p.UID, c.restarts[k], cs.RestartCount)
			}
			c.restarts[k] = max(c.restarts[k], cs.RestartCount)
			if shape.kept(cs.Name) && !reused && int(cs.RestartCount) > c.killed[k]+c.failedStarts[k] {
				c.s.failf("%s/%s (UID %s, shape %s) restarted %d times, but it never exits by itself, the soak killed its monitor %d times and %d runs failed to start; last state %+v",
					p.Name, cs.Name, p.UID, shape, cs.RestartCount, c.killed[k], c.failedStarts[k], cs.LastTerminationState.Terminated)
			}
			for _, term := range []*v1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
				if term == nil {
					continue
				}
				if term.Reason == "StartError" && term.ExitCode == 128 {
					continue // a run that could not start (a full disk): recorded as the kubelet does
				}
				// A container stopped by an eviction ends as a stop ends it:
				// its TERM trap's code, or 137 after the grace period. So does
				// one whose manifest was removed and added again: a removal
				// stops the pod at once, as the kubelet's REMOVE, and the same
				// UID added again starts it anew with that stop as its last
				// state, as the kubelet's ADD.
				stopped := c.evicted[string(p.UID)] || reused
				want := map[int32]bool{137: c.killed[k] > 0 || stopped, 0: stopped}
				switch {
				case shape == crashing:
					want[crashCode] = true
				case shape == exiting, cs.Name == "init":
					want[0] = true
				case shape == unhealthy:
					want[0], want[137] = true, true // TERM on liveness failure, or KILL after the grace period
				}
				if !want[term.ExitCode] {
					c.s.failf("%s/%s (UID %s, shape %s) recorded exit code %d (%s: %s), which it never exits with",
						p.Name, cs.Name, p.UID, shape, term.ExitCode, term.Reason, term.Message)
				}
			}
		}
	}
}

// checkEvicted reports whether p is evicted (or refused at admission) now,
// as the kubelet reports it: Failed, reason Evicted, and the kubelet's
// message. A critical pod never is (the kubelet holds every static pod
// critical, IsCriticalPod; staticpodd only those of a critical priority).
// An evicted pod starts again afresh, as a new life of its UID: its counts
// and marks start again, as for a manifest added again. c.mu is held.
func (c *checker) checkEvicted(p *v1.Pod, sp *spec) bool {
	uid := string(p.UID)
	if p.Status.Reason != "Evicted" {
		if p.Status.Phase == v1.PodFailed && sp.shape != crashing && sp.shape != exiting {
			c.s.failf("%s (UID %s, shape %s) is Failed, reason %q: %s", p.Name, uid, sp.shape, p.Status.Reason, p.Status.Message)
		}
		delete(c.out, uid)
		return false
	}
	if p.Status.Phase != v1.PodFailed {
		c.s.failf("%s (UID %s) has reason Evicted in phase %s, want Failed", p.Name, uid, p.Status.Phase)
	}
	if sp.critical {
		c.s.failf("%s (UID %s) is critical (system-node-critical) and was evicted: %s", p.Name, uid, p.Status.Message)
	}
	evicted := strings.HasPrefix(p.Status.Message, "The node was low on resource: ")
	if !evicted && !strings.HasPrefix(p.Status.Message, "The node had condition: ") {
		c.s.failf("%s (UID %s) evicted with the message %q, not the kubelet's", p.Name, uid, p.Status.Message)
	}
	if !c.out[uid] {
		c.out[uid] = true
		c.evicted[uid] = true
		c.reused[fmt.Sprintf("%s %s", sp.name, listedGen(p))] = true
		if evicted {
			c.evictions++
		} else {
			c.refusals++
		}
		c.s.logf("%s (UID %s, shape %s) %s", p.Name, uid, sp.shape, p.Status.Message)
	}
	return true
}

// reuse records that generation gen of pod name was added again after its
// removal.
func (c *checker) reuse(name string, gen int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reused[fmt.Sprintf("%s %d", name, gen)] = true
}

// killedMonitor records that the soak killed the monitor of k.
func (c *checker) killedMonitor(k ckey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.killed[k]++
}

// checkQuiet checks what holds once nothing moves: containers that never
// exit by themselves restarted exactly as often as their monitor was killed,
// and each container ran (said "start <uid>" in its marks) as often as its
// restart count says, less the runs that failed to start, give or take the
// run starting right now.
func (c *checker) checkQuiet(pods []v1.Pod) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, p := range pods {
		sp := c.s.byFullName(p.Name)
		if sp == nil || p.DeletionTimestamp != nil {
			continue
		}
		if c.reused[fmt.Sprintf("%s %s", sp.name, listedGen(&p))] {
			continue // its marks and kills are of several lives of this UID
		}
		shape := c.shapeOf(sp, listedGen(&p))
		for _, cs := range statuses(&p) {
			k := ckey{string(p.UID), cs.Name}
			if shape.kept(cs.Name) && int(cs.RestartCount) != c.killed[k]+c.failedStarts[k] {
				c.s.failf("%s/%s (UID %s) restarted %d times; the soak killed its monitor %d times and %d runs failed to start", p.Name, cs.Name, p.UID, cs.RestartCount, c.killed[k], c.failedStarts[k])
			}
			// A run that failed to start (StartError) counts as a restart
			// but never ran its command.
			failed := int32(c.failedStarts[k])
			lo, hi := cs.RestartCount-failed, cs.RestartCount+2
			if shape.kept(cs.Name) && cs.State.Running != nil {
				lo, hi = cs.RestartCount+1-failed, cs.RestartCount+1
			}
			// A container listed running may not have reached its shell's
			// first line yet (a run that began a moment ago, on a busy
			// machine): its mark is waited for.
			var runs int32
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
				b, _ := os.ReadFile(filepath.Join(sp.marks, cs.Name+".marks"))
				runs = int32(strings.Count(string(b), "start "+string(p.UID)+"\n"))
				if runs >= lo || cs.State.Running == nil || time.Now().After(deadline) {
					break
				}
			}
			if runs < lo || runs > hi {
				c.s.failf("%s/%s (UID %s) ran %d times by its own marks, but its restart count is %d, %d of them failed starts (state %+v)", p.Name, cs.Name, p.UID, runs, cs.RestartCount, failed, cs.State)
			}
		}
	}
}

// checkLogs checks a running logger's current run: its CRI log, read back
// across rotations (gzipped or not), holds the numbered lines 1..n once each
// and in order, and n reaches the number the container said it had written.
func (c *checker) checkLogs(d *testdaemon.Daemon, p *v1.Pod) error {
	var cs *v1.ContainerStatus
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name == "main" {
			cs = &p.Status.ContainerStatuses[i]
		}
	}
	if cs == nil || cs.State.Running == nil {
		return nil
	}
	sp := c.s.byFullName(p.Name)
	b, err := os.ReadFile(filepath.Join(sp.marks, "progress-"+string(p.UID)))
	if err != nil {
		return nil // no batch written yet
	}
	written, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	live := filepath.Join(d.LogsDir, fmt.Sprintf("%s_%s_%s", p.Namespace, p.Name, p.UID), "main", fmt.Sprintf("%d.log", cs.RestartCount))
	deadline := time.Now().Add(30 * time.Second)
	for {
		last, err := readNumbered(live)
		if err != nil && !errors.Is(err, errMoved) {
			return fmt.Errorf("%s/main (UID %s) run %d: %w", p.Name, p.UID, cs.RestartCount, err)
		}
		if last >= written {
			c.mu.Lock()
			c.logLines += last
			c.mu.Unlock()
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s/main (UID %s) run %d: its log ends at line %d, but it wrote %d lines", p.Name, p.UID, cs.RestartCount, last, written)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// errMoved is a log file that rotation or compression moved while it was
// being read: read again.
var errMoved = errors.New("a log file moved while read")

// readNumbered reads a run's log files, rotated (oldest first) then live, and
// returns the last line number, checking that lines are 1, 2, 3... with none
// missing or repeated. As the daemon's reader does, it opens the live file
// first and lists the rotated ones after, and reads again if the live file
// was rotated meanwhile: otherwise the file rotated between the listing and
// the read of the live one would look like lines lost.
func readNumbered(live string) (int, error) {
	lf, err := os.Open(live)
	if err != nil {
		return 0, err
	}
	defer lf.Close()
	rotated, _, err := logfiles.RotatedLogs(live)
	if err != nil {
		return 0, err
	}
	var opened, now unix.Stat_t
	if err := unix.Fstat(int(lf.Fd()), &opened); err != nil {
		return 0, err
	}
	if err := unix.Stat(live, &now); err != nil || now.Ino != opened.Ino {
		return 0, errMoved
	}
	want := 1
	check := func(name string, data []byte) error {
		sc := bufio.NewScanner(bytes.NewReader(data))
		sc.Buffer(make([]byte, 64<<10), 64<<10)
		for sc.Scan() {
			fields := strings.SplitN(sc.Text(), " ", 4)
			if len(fields) != 4 || fields[2] != "F" {
				return fmt.Errorf("%s: entry %q is not a whole line", name, sc.Text())
			}
			num, _, _ := strings.Cut(fields[3], " ")
			got, err := strconv.Atoi(num)
			if err != nil || got != want {
				return fmt.Errorf("%s: line %q where line %d was due (a line lost or repeated)", name, trunc(fields[3]), want)
			}
			want++
		}
		return nil
	}
	for _, f := range rotated {
		data, err := readLogFile(f)
		if errors.Is(err, fs.ErrNotExist) {
			return 0, errMoved // compressed meanwhile
		}
		if err != nil {
			return 0, err
		}
		if err := check(filepath.Base(f.Path), data); err != nil {
			return 0, err
		}
	}
	data, err := io.ReadAll(lf)
	if err != nil {
		return 0, err
	}
	if err := check(filepath.Base(live), wholeLines(data)); err != nil {
		return 0, err
	}
	return want - 1, nil
}

// wholeLines cuts a live file's last entry if it is still being written.
func wholeLines(data []byte) []byte {
	if i := bytes.LastIndexByte(data, '\n'); i >= 0 {
		return data[:i+1]
	}
	return nil
}

func readLogFile(f logfiles.RotatedLog) ([]byte, error) {
	file, err := os.Open(f.Path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var r io.Reader = file
	if f.Compressed {
		zr, err := gzip.NewReader(file)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Path, err)
		}
		r = zr
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.Path, err)
	}
	return data, nil
}

func trunc(s string) string {
	if len(s) > 20 {
		return s[:20] + "..."
	}
	return s
}
