package agent

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// fakeRuntime stands in for oci.Runtime, which needs root and real images. It
// records every call in order, and tests inject failures through its fields.
type fakeRuntime struct {
	mu        sync.Mutex
	calls     []string
	at        []time.Time // when each call was made
	ctrs      map[string]*fakeCtr
	sandboxes map[string]bool
	podIPs    map[string][]netip.Addr // the IPs a sandbox gets, by pod UID
	noNet     map[string]string       // why a sandbox has no pod network, by pod UID
	chosen    *podspec.NetworkConf    // the network a pod made now gets, when not the sandboxes
	next      int
	missing   map[string]bool // images not in the store
	// ids are the store's image IDs by reference, where a test moves one
	// (an import or a pull of a moved tag); else "sha256:" + the reference.
	ids map[string]string
	// afterLookup, when set, runs in each StartContainer that found its image
	// missing, after the lookup and before StartContainer returns, outside the lock:
	// an image that arrives inside that window.
	afterLookup func(image string)
	crash       map[string]int  // container name -> exit code right after start
	stubborn    map[string]bool // container names that ignore SIGTERM
	volumesErr  error           // what RemoveVolumes returns, while not nil
	// rmSandboxErr, while not nil, is what RemoveSandbox returns once it
	// removed the sandbox's record (oci/sandbox's remove: the record
	// first, then the unmounts and the cgroup, which can fail).
	rmSandboxErr error
	startErr     error             // every StartContainer fails with it
	execFail     map[string]string // container name -> why its process cannot start (StartError)
	vanished     map[string]bool   // container IDs whose Wait says ErrNotExist
	starts       []time.Time       // when each StartContainer succeeded
	// stopOrder is each started container's StopBefore and StopAfter, by ID.
	stopOrder map[string][2][]string
	// health is what an HTTP probe of a path gets from any container:
	// the status code (404 when absent; -1: a 200 whose body is cut short).
	health   map[string]int
	dials    []string // pod UID and address of each Dial
	execCode int      // every Exec's exit code
	execErr  error    // every Exec fails with it
	// messages are the termination messages containers exit with, by name.
	messages map[string]string
	// execFunc, when set, runs every Exec, outside the lock.
	execFunc func(ctx context.Context, c podspec.ContainerStatus, spec podspec.ExecSpec) (int, error)
	// debugFunc, when set, is what a debug container does until it exits.
	debugFunc func(ctx context.Context) (int, error)
	// marks are the postStart marks, kept across agents as a root dir is.
	marks *memMarks
	// stats is what Stats returns for the node and, by pod UID, each pod
	// with a sandbox (zero usage for a pod not in it).
	node     podspec.NodeStats
	podUsage map[string]podspec.Usage
	// sandboxGate, when set, holds every SandboxStatus until it is closed.
	sandboxGate chan struct{}
	// onStart, when set, is called at each StartContainer, before anything else.
	onStart func(c *podspec.Container)
	// firstImages are the FirstImage each CreateSandbox was given, by pod UID.
	firstImages map[string]string
	// rootDir, when set, is the root dir whose pods/<uid> RemoveVolumes
	// removes, as volumes.Remove does.
	rootDir string
}

// memMarks are postStart marks in memory.
type memMarks struct {
	mu sync.Mutex
	m  map[string]bool
}

func (m *memMarks) key(uid, name string, attempt int) string {
	return fmt.Sprintf("%s/%s#%d", uid, name, attempt)
}

func (m *memMarks) Mark(uid, name string, attempt int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.m[m.key(uid, name, attempt)] = true
	return nil
}

func (m *memMarks) Clear(uid, name string, attempt int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, m.key(uid, name, attempt))
	return nil
}

func (m *memMarks) Marked(uid, name string, attempt int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.m[m.key(uid, name, attempt)]
}

// List is the marks, sorted.
func (m *memMarks) List() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Sorted(maps.Keys(m.m))
}

type fakeCtr struct {
	st   podspec.ContainerStatus
	done chan struct{}
}

func newFakeRuntime() *fakeRuntime {
	return &fakeRuntime{
		ctrs:      map[string]*fakeCtr{},
		sandboxes: map[string]bool{},
		missing:   map[string]bool{},
		crash:     map[string]int{},
		stubborn:  map[string]bool{},
		vanished:  map[string]bool{},
		execFail:  map[string]string{},
		health:    map[string]int{},
		messages:  map[string]string{},
		marks:     &memMarks{m: map[string]bool{}},
	}
}

// SetHealth makes HTTP probes of path get code from now on.
func (f *fakeRuntime) SetHealth(path string, code int) {
	f.mu.Lock()
	f.health[path] = code
	f.mu.Unlock()
}

// Dial answers one HTTP/1.1 request in memory with the status SetHealth set
// for its path: a real HTTP exchange over a pipe, inside the synctest bubble.
func (f *fakeRuntime) Dial(ctx context.Context, podUID, network, addr string) (net.Conn, error) {
	f.mu.Lock()
	f.dials = append(f.dials, podUID+" "+addr)
	f.mu.Unlock()
	client, server := net.Pipe()
	go func() {
		defer server.Close()
		req, err := http.ReadRequest(bufio.NewReader(server))
		if err != nil {
			return
		}
		f.mu.Lock()
		code, ok := f.health[req.URL.Path]
		f.mu.Unlock()
		if !ok {
			code = http.StatusNotFound
		}
		if code == -1 {
			fmt.Fprint(server, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\nshort")
			return
		}
		fmt.Fprintf(server, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", code, http.StatusText(code))
	}()
	return client, nil
}

func (f *fakeRuntime) record(format string, args ...any) {
	f.calls = append(f.calls, fmt.Sprintf(format, args...))
	f.at = append(f.at, time.Now())
}

// When is the time of the first call that is call; zero if none.
func (f *fakeRuntime) When(call string) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if i := slices.Index(f.calls, call); i >= 0 {
		return f.at[i]
	}
	return time.Time{}
}

// Calls returns the calls so far that start with one of prefixes (all if none).
func (f *fakeRuntime) Calls(prefixes ...string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, c := range f.calls {
		if len(prefixes) == 0 || slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(c, p) }) {
			out = append(out, c)
		}
	}
	return out
}

func (f *fakeRuntime) CreateSandbox(ctx context.Context, pod *podspec.Pod) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.record("sandbox %s", pod.UID)
	f.sandboxes[pod.UID] = true
	if f.firstImages == nil {
		f.firstImages = map[string]string{}
	}
	f.firstImages[pod.UID] = pod.FirstImage
	return nil
}

func (f *fakeRuntime) RemoveSandbox(ctx context.Context, uid string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.ctrs {
		if c.st.PodUID == uid {
			return fmt.Errorf("remove sandbox %s: container %s still exists", uid, c.st.ID)
		}
	}
	f.record("rmsandbox %s", uid)
	delete(f.sandboxes, uid)
	if f.rmSandboxErr != nil {
		return f.rmSandboxErr
	}
	return nil
}

func (f *fakeRuntime) ListSandboxes(ctx context.Context) ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for uid := range f.sandboxes {
		out = append(out, uid)
	}
	return out, nil
}

func (f *fakeRuntime) SandboxStatus(ctx context.Context, uid string) (podspec.SandboxStatus, error) {
	f.mu.Lock()
	gate := f.sandboxGate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.sandboxes[uid] {
		return podspec.SandboxStatus{}, podspec.ErrNotExist
	}
	st := podspec.SandboxStatus{IPs: f.podIPs[uid], Message: f.noNet[uid], Chosen: f.chosen}
	if st.Message == "" {
		st.Network, st.Source, st.Plugins = "staticpodd", "default", []string{"bridge"}
	}
	return st, nil
}

func (f *fakeRuntime) StartContainer(ctx context.Context, pod *podspec.Pod, c *podspec.Container) (podspec.ContainerStatus, error) {
	if f.onStart != nil {
		f.onStart(c)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.sandboxes[pod.UID] {
		return podspec.ContainerStatus{}, fmt.Errorf("start %s: no sandbox %s", c.Name, pod.UID)
	}
	if f.missing[c.Image] {
		f.record("start-missing %s/%s", pod.UID, c.Name)
		if hook := f.afterLookup; hook != nil {
			f.mu.Unlock()
			hook(c.Image)
			f.mu.Lock()
		}
		return podspec.ContainerStatus{}, fmt.Errorf("start %s: image %s: %w", c.Name, c.Image, podspec.ErrImageNotPresent)
	}
	if f.startErr != nil {
		f.record("start-failed %s/%s", pod.UID, c.Name)
		return podspec.ContainerStatus{}, f.startErr
	}
	f.next++
	now := time.Now()
	stop := c.StopSignal
	if stop == 0 {
		stop = syscall.SIGTERM
	}
	st := podspec.ContainerStatus{
		ID: fmt.Sprintf("c%d", f.next), PodUID: pod.UID, PodName: pod.Name, Name: c.Name,
		Attempt: c.Attempt, Hash: c.Hash, Image: c.Image, ImageID: f.startImageLocked(c),
		State: podspec.StateRunning, Pid: 1000 + f.next, CreatedAt: now, StartedAt: now,
		StopSignal: stop, Annotations: c.Annotations,
	}
	fc := &fakeCtr{st: st, done: make(chan struct{})}
	f.ctrs[st.ID] = fc
	if msg, ok := f.execFail[c.Name]; ok {
		// Kept, exited, as containerd keeps a container its runtime could not start.
		fc.st.State, fc.st.ExitCode, fc.st.Reason, fc.st.Message = podspec.StateExited, 128, "StartError", msg
		fc.st.Pid, fc.st.StartedAt, fc.st.FinishedAt = 0, time.Time{}, now
		close(fc.done)
		f.record("start-exec-failed %s/%s#%d", pod.UID, c.Name, c.Attempt)
		return fc.st, fmt.Errorf("start %s: %w: %s", c.Name, podspec.ErrStartFailed, msg)
	}
	f.starts = append(f.starts, now)
	if f.stopOrder == nil {
		f.stopOrder = map[string][2][]string{}
	}
	f.stopOrder[st.ID] = [2][]string{c.StopBefore, c.StopAfter}
	f.record("start %s/%s#%d", pod.UID, c.Name, c.Attempt)
	if code, ok := f.crash[c.Name]; ok {
		f.exitLocked(fc, code)
	}
	return st, nil
}

// imageID is the ID of the store's image ref names now.
func (f *fakeRuntime) imageID(ref string) string {
	if id, ok := f.ids[ref]; ok {
		return id
	}
	return "sha256:" + ref
}

// startImageLocked is the image c starts from, as the runtime's Prepare
// finds it: the ID the agent made sure of, else what its reference names.
func (f *fakeRuntime) startImageLocked(c *podspec.Container) string {
	if c.ImageID != "" {
		return c.ImageID
	}
	return f.imageID(c.Image)
}

func (f *fakeRuntime) exitLocked(c *fakeCtr, code int) {
	if c.st.State == podspec.StateExited {
		return
	}
	c.st.State, c.st.ExitCode, c.st.FinishedAt, c.st.Pid = podspec.StateExited, code, time.Now(), 0
	c.st.Reason = "Error"
	if code == 0 {
		c.st.Reason = "Completed"
	}
	c.st.Message = f.messages[c.st.Name]
	close(c.done)
}

// Exit makes a running container exit with code, as if it crashed.
func (f *fakeRuntime) Exit(id string, code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exitLocked(f.ctrs[id], code)
}

func (f *fakeRuntime) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.ctrs[id]
	if c == nil {
		return fmt.Errorf("signal %s: %w", id, podspec.ErrNotExist)
	}
	f.record("signal %s %s", id, sig)
	stop := c.st.StopSignal
	if stop == 0 {
		stop = syscall.SIGTERM
	}
	switch {
	case sig == syscall.SIGKILL:
		f.exitLocked(c, 137)
	case sig == stop && !f.stubborn[c.st.Name]:
		f.exitLocked(c, 128+int(sig))
	}
	return nil
}

// AfterExit calls fn once the container has exited, or ctx ended, or at
// once for one it does not have (or whose state vanished), as
// oci.Runtime's does once the monitor has exited: the worker's Wait then
// returns at once.
func (f *fakeRuntime) AfterExit(ctx context.Context, id string, fn func()) {
	f.mu.Lock()
	c, gone := f.ctrs[id], f.vanished[id]
	f.mu.Unlock()
	if c == nil || gone {
		go fn()
		return
	}
	go func() {
		select {
		case <-c.done:
		case <-ctx.Done():
		}
		fn()
	}()
}

func (f *fakeRuntime) Wait(ctx context.Context, id string) (podspec.ContainerStatus, error) {
	f.mu.Lock()
	c := f.ctrs[id]
	gone := f.vanished[id]
	f.mu.Unlock()
	if c == nil || gone {
		return podspec.ContainerStatus{}, fmt.Errorf("wait %s: %w", id, podspec.ErrNotExist)
	}
	select {
	case <-c.done:
	case <-ctx.Done():
		return podspec.ContainerStatus{}, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return c.st, nil
}

func (f *fakeRuntime) Destroy(ctx context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.ctrs[id]
	if c == nil {
		return nil
	}
	if c.st.State != podspec.StateExited {
		return fmt.Errorf("destroy %s: container is running", id)
	}
	f.record("destroy %s", id)
	delete(f.ctrs, id)
	return nil
}

func (f *fakeRuntime) List(ctx context.Context) ([]podspec.ContainerStatus, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []podspec.ContainerStatus
	for _, c := range f.ctrs {
		out = append(out, c.st)
	}
	return out, nil
}

// Exec prints its command to spec.Stdout and exits with execCode, or runs
// execFunc.
func (f *fakeRuntime) Stats(ctx context.Context) (*podspec.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	sum := &podspec.Summary{Node: f.node}
	for _, uid := range slices.Sorted(maps.Keys(f.sandboxes)) {
		sum.Pods = append(sum.Pods, podspec.PodStats{UID: uid, Usage: f.podUsage[uid]})
	}
	return sum, nil
}

func (f *fakeRuntime) NodeStats(ctx context.Context) (podspec.NodeStats, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.node, nil
}

// SetStats makes Stats report node and, by pod UID, these usages.
func (f *fakeRuntime) SetStats(node podspec.NodeStats, pods map[string]podspec.Usage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.node, f.podUsage = node, pods
}

func (f *fakeRuntime) Debug(ctx context.Context, pod *podspec.Pod, c *podspec.Container, target string, spec podspec.ExecSpec, started func(string)) (int, error) {
	f.mu.Lock()
	f.record("debug %s %s %s target=%s %s", pod.UID, c.Name, c.Image, target, strings.Join(spec.Cmd, " "))
	fn := f.debugFunc
	f.mu.Unlock()
	if started != nil {
		started("debug-" + c.Name)
	}
	code := 0
	var err error
	if fn != nil {
		code, err = fn(ctx)
	}
	f.mu.Lock()
	f.record("debugged %s %s", pod.UID, c.Name)
	f.mu.Unlock()
	return code, err
}

func (f *fakeRuntime) Exec(ctx context.Context, id string, spec podspec.ExecSpec) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.ctrs[id]
	switch {
	case c == nil:
		return -1, fmt.Errorf("exec in %s: %w", id, podspec.ErrNotExist)
	case c.st.State != podspec.StateRunning:
		return -1, fmt.Errorf("exec in %s: %w", id, podspec.ErrNotRunning)
	case f.execErr != nil:
		return -1, f.execErr
	}
	f.record("exec %s %s", id, strings.Join(spec.Cmd, " "))
	if fn := f.execFunc; fn != nil {
		st := c.st
		f.mu.Unlock()
		defer f.mu.Lock()
		return fn(ctx, st, spec)
	}
	if spec.Stdout != nil {
		fmt.Fprintln(spec.Stdout, strings.Join(spec.Cmd, " "))
	}
	return f.execCode, nil
}

// Running returns the IDs of running containers, sorted.
func (f *fakeRuntime) Running() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id, c := range f.ctrs {
		if c.st.State == podspec.StateRunning {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// adopt puts a container a previous daemon started into the runtime.
func (f *fakeRuntime) adopt(st podspec.ContainerStatus) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fc := &fakeCtr{st: st, done: make(chan struct{})}
	if st.State == podspec.StateExited {
		close(fc.done)
	}
	f.ctrs[st.ID] = fc
	f.sandboxes[st.PodUID] = true
}

// fakeConv converts without touching the disk: the hash is the image and command.
type fakeConv struct {
	rt   *fakeRuntime     // volume calls go to its call log
	fail map[string]error // container name -> conversion error
	// sweeps holds the UIDs each RemoveLeftovers kept, joined by commas;
	// guarded by rt.mu.
	sweeps       []string
	callsAtSweep int // how many runtime calls came before the last sweep
}

func (c *fakeConv) Sandbox(pod *v1.Pod) *podspec.Pod {
	return &podspec.Pod{UID: string(pod.UID), Namespace: pod.Namespace, Name: pod.Name, HostNetwork: pod.Spec.HostNetwork}
}

func (c *fakeConv) Container(pod *v1.Pod, ctr *v1.Container, attempt int) (*podspec.Container, error) {
	if err := c.fail[ctr.Name]; err != nil {
		return nil, err
	}
	var stop syscall.Signal
	if l := ctr.Lifecycle; l != nil && l.StopSignal != nil {
		var err error
		if stop, err = podspec.ParseSignal(string(*l.StopSignal)); err != nil {
			return nil, err
		}
	}
	return &podspec.Container{
		Name: ctr.Name, Image: ctr.Image, Command: ctr.Command, Attempt: attempt,
		Hash: hashOf(ctr), StopSignal: stop,
	}, nil
}

func hashOf(ctr *v1.Container) string {
	return ctr.Image + "|" + strings.Join(ctr.Command, " ")
}

func (c *fakeConv) PrepareVolumes(pod *v1.Pod) error {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	c.rt.record("volumes %s", pod.UID)
	return nil
}

func (c *fakeConv) RefreshVolumes(pod *v1.Pod) error { return nil }

func (c *fakeConv) RemoveVolumes(uid string) error {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	c.rt.record("rmvolumes %s", uid)
	if c.rt.volumesErr != nil {
		return c.rt.volumesErr
	}
	if c.rt.rootDir != "" {
		return os.RemoveAll(filepath.Join(c.rt.rootDir, "pods", uid))
	}
	return nil
}

func (c *fakeConv) PruneLogs(pod *v1.Pod, container string, keepFrom int) error {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	c.rt.record("prunelogs %s/%s <%d", pod.UID, container, keepFrom)
	return nil
}

func (c *fakeConv) RemoveLogs(uid string) error {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	c.rt.record("rmlogs %s", uid)
	return nil
}

func (c *fakeConv) RemoveLeftovers(keep map[string]bool) ([]string, error) {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	c.sweeps = append(c.sweeps, strings.Join(slices.Sorted(maps.Keys(keep)), ","))
	c.callsAtSweep = len(c.rt.calls)
	return nil, nil
}

// Sweeps returns, for each RemoveLeftovers, the UIDs it was told to keep.
func (c *fakeConv) Sweeps() []string {
	c.rt.mu.Lock()
	defer c.rt.mu.Unlock()
	return slices.Clone(c.sweeps)
}

// Starts returns when each successful StartContainer happened.
func (f *fakeRuntime) Starts() []time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.starts)
}

// Len is how many containers and sandboxes the runtime holds.
func (f *fakeRuntime) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.ctrs) + len(f.sandboxes)
}

// StopOrder is the StopBefore and StopAfter container id was started with.
func (f *fakeRuntime) StopOrder(id string) (before, after []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	o := f.stopOrder[id]
	return o[0], o[1]
}
