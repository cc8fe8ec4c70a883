//go:build linux && cgo

package oci

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/oci/image/policy"
	mon "github.com/staticpodd/staticpodd/oci/monitor"
	"github.com/staticpodd/staticpodd/oci/sandbox"
	"github.com/staticpodd/staticpodd/oci/spec"
)

// New returns a Runtime keeping its state under cfg.RunDir. It only holds
// cfg: Recover, which must come before any other method, prepares the state
// directory and adopts what an earlier daemon left there, Start
// starts the checks that run beside the pods, and Close stops them.
func New(cfg Config) (*Runtime, error) {
	if cfg.RunDir == "" {
		return nil, errors.New("new runtime: RunDir is required")
	}
	if cfg.Images == nil {
		return nil, errors.New("new runtime: Images is required")
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = DefaultCgroupRoot
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = DefaultStartTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{
		cfg:         cfg,
		log:         cfg.Logger,
		monitors:    map[string]*monitor{},
		starting:    map[string]bool{},
		removing:    map[string]bool{},
		monitorPath: selfExe,
	}
	r.checked = make(chan struct{})
	if cfg.Network != nil {
		r.net = sandbox.NewNetwork(*cfg.Network, cfg.RunDir, cfg.Logger)
	}
	r.sb = sandbox.New(sandbox.Config{
		RunDir: cfg.RunDir,
		CgroupsPath: func(uid string) string {
			return podCgroupsPath(cfg.CgroupDriver, cfg.CgroupRoot, uid)
		},
		Network: r.net,
		Warm:    r.warmer.warm,
		Logger:  cfg.Logger,
	})
	return r, nil
}

func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ErrStartTimeout is the cause of a StartContainer that took longer than
// Config.StartTimeout.
var ErrStartTimeout = errors.New("start timed out")

// StartContainer creates and starts container c of pod and returns once its
// process has been told to exec. A start that outlives ctx or
// Config.StartTimeout is killed and cleaned up. An image missing from the
// store is an error wrapping podspec.ErrImageNotPresent.
//
// A failure once the monitor was told to go wraps podspec.ErrStartFailed. A
// container whose process the monitor could not start (its command does not
// exist or is not executable, say) is kept, exited with exit code 128 and
// reason StartError, as containerd keeps it: StartContainer returns its status
// with the error, and Destroy removes it. Any other failed start leaves nothing.
func (r *Runtime) StartContainer(ctx context.Context, pod *podspec.Pod, c *podspec.Container) (podspec.ContainerStatus, error) {
	if err := ctx.Err(); err != nil {
		return podspec.ContainerStatus{}, err
	}
	ctx, cancel := context.WithTimeoutCause(ctx, r.cfg.StartTimeout,
		fmt.Errorf("%w after %v", ErrStartTimeout, r.cfg.StartTimeout))
	defer cancel()
	r.warmer.warm()
	pr, err := r.sb.Record(pod.UID)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = podspec.ErrNotExist
		}
		return podspec.ContainerStatus{}, fmt.Errorf("start container %s of pod %s: sandbox: %w", c.Name, pod.Name, err)
	}
	// Before the spare monitor is taken: a pod waiting for its image would
	// otherwise use one up at every retry.
	img, err := r.cfg.Images.Get(c.Image)
	if err != nil {
		// What was prepared with the sandbox is not kept while the pod
		// waits for its image: it may come back as another.
		r.dropAhead(pod.UID)
		return podspec.ContainerStatus{}, fmt.Errorf("start container %s of pod %s: %w", c.Name, pod.Name, err)
	}
	imageID := c.ImageID
	if imageID == "" {
		imageID = img.ID
	}
	// The monitor and snapshot prepared while the sandbox was made, if
	// they are this container's.
	pm := r.claimAhead(pod, c, imageID)
	if pm == nil {
		if pm, err = r.takeMonitor(); err != nil {
			return podspec.ContainerStatus{}, fmt.Errorf("start container %s of pod %s: %w", c.Name, pod.Name, err)
		}
	}
	defer r.refillSpare()
	id := pm.id
	// Registered before its record is written, so a concurrent status sees
	// the container as created rather than as one whose monitor died.
	r.mu.Lock()
	r.monitors[id] = pm.m
	r.starting[id] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.starting, id)
		r.mu.Unlock()
	}()
	st, err := r.start(ctx, pm, pod, c, pr)
	if err != nil {
		if failed, ok := r.startFailed(ctx, pm); ok {
			return failed, fmt.Errorf("start container %s (%s) of pod %s: %w", c.Name, id, pod.Name, err)
		}
		pm.kill()
		r.cleanup(id)
		return podspec.ContainerStatus{}, fmt.Errorf("start container %s (%s) of pod %s: %w", c.Name, id, pod.Name, err)
	}
	return st, nil
}

// startFailed returns the status of pm's container if its monitor recorded
// that it could not start it and has exited: the container exists, exited
// with reason StartError. Any other failure (a timeout, a monitor that died
// without a word) is not one.
func (r *Runtime) startFailed(ctx context.Context, pm *pendingMonitor) (podspec.ContainerStatus, bool) {
	if !pm.m.exited() {
		return podspec.ContainerStatus{}, false
	}
	st, err := r.status(ctx, pm.id)
	if err != nil || st.State != podspec.StateExited || st.Reason != reasonStartError {
		return podspec.ContainerStatus{}, false
	}
	return st, true
}

// startImage is what c starts from: the image the agent made sure of, by
// its ID, else what its reference names now.
func startImage(c *podspec.Container) string {
	if c.ImageID != "" {
		return c.ImageID
	}
	return c.Image
}

func (r *Runtime) start(ctx context.Context, pm *pendingMonitor, pod *podspec.Pod, c *podspec.Container, pr sandbox.Record) (podspec.ContainerStatus, error) {
	id, dir := pm.id, r.containerDir(pm.id)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return podspec.ContainerStatus{}, err
	}
	rot := r.logRotation()
	rootfs, img, err := r.cfg.Images.Prepare(id, startImage(c))
	if errors.Is(err, policy.ErrSignatureValidationFailed) {
		return podspec.ContainerStatus{}, fmt.Errorf("%w: %s: %w", podspec.ErrImageRefused, c.Image, err)
	}
	if err != nil {
		return podspec.ContainerStatus{}, fmt.Errorf("prepare rootfs from %s: %w", c.Image, err)
	}
	// Read now, as the kubelet reads them when it makes the container: an
	// init container before this one wrote them.
	env, err := resolveEnvFiles(c.Env)
	if err != nil {
		return podspec.ContainerStatus{}, err
	}
	mounts, err := bindSubPaths(filepath.Join(dir, subPathsDir), c.Mounts)
	if err != nil {
		return podspec.ContainerStatus{}, err
	}
	cs := *c
	cs.Mounts, cs.Env = mounts, env
	if c.TerminationMessagePath != "" {
		src, err := createTerminationLog(dir)
		if err != nil {
			return podspec.ContainerStatus{}, fmt.Errorf("termination log: %w", err)
		}
		// After the volumes, as the kubelet's makeMounts: it wins over one
		// mounted at the same path.
		cs.Mounts = append(slices.Clip(mounts), podspec.Mount{Destination: c.TerminationMessagePath, Type: "bind", Source: src})
	}
	s, err := spec.Generate(pod, &cs, img.Config, rootfs, r.sb.Join(pr, containerCgroupsPath(pr.CgroupsPath, id)))
	if err != nil {
		return podspec.ContainerStatus{}, fmt.Errorf("%w: %w", podspec.ErrContainerConfig, err)
	}
	stopSignal := r.stopSignal(c, img.Config.StopSignal)
	if s.Linux != nil && isSystemdCgroupsPath(s.Linux.CgroupsPath) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		maps.Copy(s.Annotations, scopeStopProperties(pod.TerminationGracePeriod, stopSignal))
		maps.Copy(s.Annotations, scopeOrderProperties(c.StopBefore, c.StopAfter))
	}
	// The values of sensitive variables go to the monitor over its go pipe,
	// never into the spec's file (see mon.SealEnv).
	var secret []string
	s.Process.Env, secret = mon.SealEnv(s.Process.Env, sensitiveNames(cs.Env))
	secretEnv, err := mon.EncodeSecretEnv(secret)
	if err != nil {
		return podspec.ContainerStatus{}, fmt.Errorf("%w: %w", podspec.ErrContainerConfig, err)
	}
	rec := containerRecord{
		ID: id, PodUID: pod.UID, PodName: pod.Name, PodNS: pod.Namespace, Name: c.Name, Attempt: c.Attempt,
		Hash: c.Hash, Image: c.Image, ImageID: img.ID, ImageRef: img.StatusRef(c.Image), LogPath: c.LogPath, CreatedAt: time.Now(),
		LogMaxSize: rot.MaxSize, LogMaxFiles: rot.MaxFiles,
		TerminationGracePeriod: pod.TerminationGracePeriod,
		StopSignal:             int(stopSignal),
		TerminationMessage:     c.TerminationMessagePath != "", TerminationMessageFromLog: c.TerminationMessageFromLog,
		Annotations: c.Annotations,
		MonitorPid:  pm.m.pid, MonitorStart: pm.m.start,
	}
	// The two fsyncs run side by side.
	specWritten := make(chan error, 1)
	go func() { specWritten <- writeJSON(filepath.Join(dir, specFile), s) }()
	err = writeJSON(filepath.Join(dir, containerFile), rec)
	if err := errors.Join(err, <-specWritten); err != nil {
		return podspec.ContainerStatus{}, err
	}
	r.notePod(id, rec.PodUID)
	if ctx.Err() != nil {
		return podspec.ContainerStatus{}, context.Cause(ctx)
	}
	rep, err := pm.run(ctx, secretEnv)
	if err != nil {
		return podspec.ContainerStatus{}, fmt.Errorf("%w: %w", podspec.ErrStartFailed, err)
	}
	st := rec.status()
	st.State, st.Pid, st.StartedAt = podspec.StateRunning, rep.Pid, rep.StartedAt
	r.log.Debug("container started", "id", id, "pod", pod.Name, "container", c.Name, "pid", rep.Pid)
	return st, nil
}

// sensitiveNames are the names of env's variables whose values came from a
// Secret: a name that is sensitive anywhere in env is, whichever of its
// entries wins.
func sensitiveNames(env []podspec.EnvVar) map[string]bool {
	var names map[string]bool
	for _, e := range env {
		if e.Sensitive {
			if names == nil {
				names = map[string]bool{}
			}
			names[e.Name] = true
		}
	}
	return names
}

// stopSignal is what stops container c: its own stop signal, else its
// image's (an image's that cannot be read is warned about), else SIGTERM, as
// containerd's CRI chooses.
func (r *Runtime) stopSignal(c *podspec.Container, image string) syscall.Signal {
	if c.StopSignal != 0 {
		return c.StopSignal
	}
	if image != "" {
		sig, err := podspec.ParseSignal(image)
		if err == nil {
			return sig
		}
		r.log.Warn("image stop signal not understood, using SIGTERM", "container", c.Name, "image", c.Image, "err", err)
	}
	return syscall.SIGTERM
}

// cleanup removes what a failed start left: libcontainer state, cgroup,
// rootfs and state dir.
func (r *Runtime) cleanup(id string) {
	if err := r.remove(id); err != nil {
		r.log.Warn("clean up failed start", "id", id, "err", err)
	}
}

// Signal sends sig to the container's init process. Signalling an exited
// container does nothing.
//
// A container still being created has no process to signal yet: SIGTERM or
// SIGKILL aborts its start instead, by killing its monitor; its exit is
// recorded as 137 (a start of this Runtime's fails instead). Other signals do
// nothing to it.
//
// After SIGKILL, a monitor that has not recorded the exit of a dead init
// within unresponsiveAfter (it is stopped or wedged) is killed, and the exit
// recorded for it, so that Wait returns.
func (r *Runtime) Signal(ctx context.Context, id string, sig syscall.Signal) error {
	st, err := r.status(ctx, id)
	if err != nil {
		return fmt.Errorf("signal container %s: %w", id, err)
	}
	switch st.State {
	case podspec.StateCreated:
		return r.abortStart(id, sig)
	case podspec.StateRunning:
	default:
		return nil
	}
	if sig != unix.SIGKILL {
		waitExec(ctx, st.Pid)
	}
	ctr, err := libcontainer.Load(r.libcontainerRoot(), id)
	if errors.Is(err, libcontainer.ErrNotExist) {
		return nil // exited and destroyed by its monitor just now
	}
	if err != nil {
		return fmt.Errorf("signal container %s: %w", id, err)
	}
	if err := mon.SignalContainer(ctr, sig); errors.Is(err, libcontainer.ErrNotRunning) {
		// libcontainer's record says its init is gone while its monitor has
		// recorded no exit: signal the init it started, through a pidfd,
		// rather than let a stop wait for nothing.
		if err := r.signalInit(id, sig); err != nil {
			return fmt.Errorf("signal container %s: %w", id, err)
		}
	} else if err != nil {
		return fmt.Errorf("signal container %s: %w", id, err)
	}
	if sig == unix.SIGKILL {
		r.watchKill(id, st.Pid)
	}
	return nil
}

// initComm is the name libcontainer's nsexec gives a container's init until
// it execs the container's own process.
const initComm = "runc:[2:INIT]"

// execWait bounds how long a signal waits for a just-started init to exec.
const execWait = 2 * time.Second

// waitExec waits, up to execWait, until pid has exec'd the container's
// process. A container counts as started once its init was told to exec,
// which the init does a moment later; a signal in between would reach
// libcontainer's init, a Go program that, as the PID namespace's init, dies
// of it with exit code 2 rather than run the container's command (found by
// the chaos soak: a liveness probe that failed at once, then the stop).
func waitExec(ctx context.Context, pid int) {
	if pid <= 0 {
		return
	}
	comm := fmt.Sprintf("/proc/%d/comm", pid)
	ctx, cancel := context.WithTimeout(ctx, execWait)
	defer cancel()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		b, err := os.ReadFile(comm)
		if err != nil || strings.TrimSuffix(string(b), "\n") != initComm {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// signalInit signals container id's init directly: the process its monitor
// recorded, if it is still the monitor's child (a pid is trusted only with
// its parent checked after its pidfd is open, so a reused pid is never hit).
// An init that is gone is not an error.
func (r *Runtime) signalInit(id string, sig syscall.Signal) error {
	var ms monitorState
	if ok, err := readOptionalJSON(filepath.Join(r.containerDir(id), stateFile), &ms); err != nil || !ok || ms.Pid == 0 {
		return err
	}
	fd, err := unix.PidfdOpen(ms.Pid, 0)
	if err != nil {
		return nil // gone
	}
	defer unix.Close(fd)
	if ppid, state, ok := procParent(ms.Pid); !ok || ppid != ms.MonitorPid || state == 'Z' || state == 'X' {
		return nil // gone, or not the container's init any more
	}
	r.log.Warn("libcontainer saw the container stopped; signalled its init directly", "id", id, "pid", ms.Pid, "signal", unix.SignalName(sig))
	if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil && !errors.Is(err, unix.ESRCH) {
		return fmt.Errorf("signal init %d: %w", ms.Pid, err)
	}
	return nil
}

// procParent reads pid's parent and state from /proc/<pid>/stat.
var procParent = mon.ProcParent

// Wait blocks until the container has exited and its exit is recorded, or ctx
// ends.
func (r *Runtime) Wait(ctx context.Context, id string) (podspec.ContainerStatus, error) {
	for {
		st, err := r.status(ctx, id)
		if err != nil {
			return podspec.ContainerStatus{}, fmt.Errorf("wait for container %s: %w", id, err)
		}
		if st.State == podspec.StateExited {
			return st, nil
		}
		m, err := r.monitorOf(id)
		if err != nil {
			return podspec.ContainerStatus{}, fmt.Errorf("wait for container %s: %w", id, err)
		}
		if m == nil {
			return podspec.ContainerStatus{}, fmt.Errorf("wait for container %s: no monitor and no exit recorded", id)
		}
		select {
		case <-m.done:
		case <-ctx.Done():
			return podspec.ContainerStatus{}, context.Cause(ctx)
		}
	}
}

// AfterExit calls f once, in a goroutine of its own, when the monitor of
// container id has exited or ctx has ended, whichever comes first; at once
// when the container's exit is recorded (its monitor may still be cleaning
// up: Wait returns the exit then), or it has no monitor that lives (exited,
// never started, or not known: Wait then says which). A caller that waits
// for many containers this way, and calls Wait only from f, holds no
// goroutine per container while they run.
func (r *Runtime) AfterExit(ctx context.Context, id string, f func()) {
	if _, err := os.Lstat(filepath.Join(r.containerDir(id), exitFile)); err == nil {
		go f()
		return
	}
	m, err := r.monitorOf(id)
	if err != nil || m == nil {
		go f()
		return
	}
	m.afterExit(ctx, f)
}

// Destroy removes an exited container. It refuses a running one.
func (r *Runtime) Destroy(ctx context.Context, id string) error {
	st, err := r.status(ctx, id)
	if errors.Is(err, podspec.ErrNotExist) {
		return r.remove(id) // partial leftovers, if any
	}
	if err != nil {
		return fmt.Errorf("destroy container %s: %w", id, err)
	}
	if st.State != podspec.StateExited {
		return fmt.Errorf("destroy container %s: it is %s", id, st.State)
	}
	// The monitor records the exit before it removes the container's
	// libcontainer state: let it finish rather than race it.
	if m, err := r.monitorOf(id); err == nil && m != nil {
		t := time.NewTimer(killWait)
		select {
		case <-m.done:
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
	}
	if err := r.remove(id); err != nil {
		return fmt.Errorf("destroy container %s: %w", id, err)
	}
	return nil
}

// remove deletes every trace of container id: libcontainer state, cgroup,
// rootfs and state dir. It tolerates any of them missing. The container's
// record goes last, and only once the rest is gone: a daemon that dies or
// fails half-way leaves a container that is listed, and removed again.
func (r *Runtime) remove(id string) error {
	r.mu.Lock()
	r.removing[id] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.removing, id)
		delete(r.monitors, id)
		r.mu.Unlock()
	}()
	var errs []error
	if ctr, err := libcontainer.Load(r.libcontainerRoot(), id); err == nil {
		_ = mon.SignalContainer(ctr, unix.SIGKILL) // only a container whose monitor died can still run
		errs = append(errs, ctr.Destroy())
	} else if errors.Is(err, libcontainer.ErrNotExist) {
		// A monitor killed in the middle of libcontainer.Create leaves a
		// state dir without its state.
		errs = append(errs, os.RemoveAll(filepath.Join(r.libcontainerRoot(), id)))
	} else {
		errs = append(errs, err)
	}
	var s specs.Spec
	if ok, err := readOptionalJSON(filepath.Join(r.containerDir(id), specFile), &s); err != nil {
		errs = append(errs, err)
	} else if ok && s.Linux != nil && s.Linux.CgroupsPath != "" {
		errs = append(errs, sandbox.RemoveCgroup(s.Linux.CgroupsPath))
	}
	errs = append(errs, r.cfg.Images.Release(id))
	// Before the state dir goes: removing it through a bind still mounted
	// would empty the volume behind it.
	errs = append(errs, unmountSubPaths(r.containerDir(id)))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	if err := removeStateDir(r.containerDir(id)); err != nil {
		return err
	}
	r.mu.Lock()
	delete(r.podOf, id)
	r.mu.Unlock()
	return nil
}

// removeStateDir removes a container's state dir, the last of its traces.
// It is renamed out of the way first, in one step: removed file by file, a
// daemon that died half-way left the record without the exit it had, and
// the next daemon took the container for one whose monitor died (killed,
// 137) and ran it again (found by the chaos soak). List removes what a
// removal cut short left.
func removeStateDir(dir string) error {
	gone := dir + removingSuffix
	if err := os.RemoveAll(gone); err != nil { // an earlier removal's, cut short
		return err
	}
	if err := os.Rename(dir, gone); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	}
	// The record first, so that what is left is nobody's container.
	if err := os.Remove(filepath.Join(gone, containerFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return os.RemoveAll(gone)
}

// List returns every container under RunDir, running or exited.
func (r *Runtime) List(ctx context.Context) ([]podspec.ContainerStatus, error) {
	entries, err := os.ReadDir(filepath.Join(r.cfg.RunDir, containersDir))
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var out []podspec.ContainerStatus
	var errs []error
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), removingSuffix) {
			// A removal cut short; nothing in it is a container any more.
			if err := os.RemoveAll(filepath.Join(r.cfg.RunDir, containersDir, e.Name())); err != nil {
				r.log.Warn("remove the rest of a removed container's state", "dir", e.Name(), "err", err)
			}
			continue
		}
		st, err := r.status(ctx, e.Name())
		if errors.Is(err, podspec.ErrNotExist) {
			continue // being created or removed
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, errors.Join(errs...)
}

// status assembles container id's status from its records, and records the
// exit of a container whose monitor died.
//
// A container whose monitor an earlier daemon told to go, and that has no
// process yet, is waited for (see awaitStart), so that it is reported
// running, or exited, rather than as one to start afresh. Only a start of
// this Runtime, or one still going when ctx ends, is reported created.
func (r *Runtime) status(ctx context.Context, id string) (podspec.ContainerStatus, error) {
	dir := r.containerDir(id)
	var rec containerRecord
	if err := readJSON(filepath.Join(dir, containerFile), &rec); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = podspec.ErrNotExist
		}
		return podspec.ContainerStatus{}, err
	}
	st := rec.status()
	waited := false
	for attempt := 0; ; attempt++ {
		var exit exitRecord
		if ok, err := readOptionalJSON(filepath.Join(dir, exitFile), &exit); err != nil {
			return st, err
		} else if ok {
			var ms monitorState
			_, _ = readOptionalJSON(filepath.Join(dir, stateFile), &ms)
			applyExit(exit, &st, ms)
			addTerminationMessage(&st, rec, dir)
			return st, nil
		}
		m, err := r.monitorOf(id)
		if err != nil {
			return st, err
		}
		if m != nil && !m.exited() {
			var ms monitorState
			if _, err := readOptionalJSON(filepath.Join(dir, stateFile), &ms); err != nil {
				return st, err
			}
			if ms.Pid > 0 {
				st.State, st.Pid, st.StartedAt = podspec.StateRunning, ms.Pid, ms.StartedAt
				return st, nil
			}
			if !waited && !r.isStarting(id) {
				waited = true
				if r.awaitStart(ctx, id, m, rec.CreatedAt.Add(r.cfg.StartTimeout)) {
					continue // look again: the exit, if any, was written first
				}
			}
			st.State = podspec.StateCreated
			return st, nil
		}
		// The monitor is gone. It writes the exit before it exits, so re-read
		// once; then the exit was never recorded.
		if attempt == 0 {
			continue
		}
		switch err := r.monitorLost(id); {
		case errors.Is(err, errStarting):
			// StartContainer has not returned yet; it reports and cleans up the failure.
			st.State = podspec.StateCreated
			return st, nil
		case errors.Is(err, errRemoving):
			return st, podspec.ErrNotExist
		case err != nil:
			return st, err
		}
	}
}

// monitorOf returns the monitor of container id, adopting it if an earlier
// daemon started it; nil if there is none.
func (r *Runtime) monitorOf(id string) (*monitor, error) {
	r.mu.Lock()
	m, ok := r.monitors[id]
	r.mu.Unlock()
	if ok {
		return m, nil
	}
	var ms monitorState
	if _, err := readOptionalJSON(filepath.Join(r.containerDir(id), stateFile), &ms); err != nil {
		return nil, err
	}
	if ms.MonitorPid == 0 {
		// Told to go, or about to be, but it has not written its state:
		// the record names it.
		var rec containerRecord
		if _, err := readOptionalJSON(filepath.Join(r.containerDir(id), containerFile), &rec); err != nil {
			return nil, err
		}
		ms = monitorState{MonitorPid: rec.MonitorPid, MonitorStart: rec.MonitorStart}
	}
	m, err := adoptMonitor(ms)
	if err != nil || m == nil {
		return nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if prev, ok := r.monitors[id]; ok {
		return prev, nil // adopted concurrently; m's poller ends with the monitor
	}
	r.monitors[id] = m
	return m, nil
}

func (rec containerRecord) status() podspec.ContainerStatus {
	return podspec.ContainerStatus{
		ID: rec.ID, PodUID: rec.PodUID, PodName: rec.PodName, PodNamespace: rec.PodNS, Name: rec.Name,
		Attempt: rec.Attempt, Hash: rec.Hash, Image: rec.Image, ImageID: rec.ImageID, ImageRef: rec.ImageRef,
		State: podspec.StateUnknown, CreatedAt: rec.CreatedAt, LogPath: rec.LogPath,
		TerminationGracePeriod: rec.TerminationGracePeriod, StopSignal: syscall.Signal(rec.StopSignal),
		Annotations: rec.Annotations,
	}
}

// addTerminationMessage appends to the message of exited container st what
// it wrote to its termination log, or the tail of its log if it failed
// without writing one and asked for it (kuberuntime
// convertToKubeContainerStatus). One that never started has no log to read.
func addTerminationMessage(st *podspec.ContainerStatus, rec containerRecord, dir string) {
	if !rec.TerminationMessage && !rec.TerminationMessageFromLog {
		return
	}
	fromLog := rec.TerminationMessageFromLog && st.ExitCode != 0 && st.Reason != reasonStartError
	var msg string
	if rec.TerminationMessage {
		var err error
		msg, err = readTerminationMessage(dir)
		switch {
		case errors.Is(err, fs.ErrNotExist):
		case err != nil:
			msg, fromLog = fmt.Sprintf("Error on reading termination log: %v", err), false
		default:
			fromLog = fromLog && msg == ""
		}
	}
	if fromLog && rec.LogPath != "" {
		var err error
		if msg, err = logTailOf(rec.LogPath); err != nil {
			msg = fmt.Sprintf("Error on reading termination message from logs: %v", err)
		}
	}
	if msg == "" {
		return
	}
	if st.Message != "" {
		st.Message += ": "
	}
	st.Message += msg
}

// applyExit puts exit e of a container that ran as ms into st.
func applyExit(e exitRecord, st *podspec.ContainerStatus, ms monitorState) {
	st.State = podspec.StateExited
	st.StartedAt = ms.StartedAt
	st.FinishedAt = e.FinishedAt
	st.ExitCode = e.ExitCode
	st.Message = e.Message
	switch {
	case e.Reason != "":
		st.Reason = e.Reason
	case e.OOMKilled:
		st.Reason = "OOMKilled"
	case e.ExitCode == 0:
		st.Reason = "Completed"
	default:
		st.Reason = "Error"
	}
}
