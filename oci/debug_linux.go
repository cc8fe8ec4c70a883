//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/opencontainers/runc/libcontainer"
	"github.com/opencontainers/runc/libcontainer/specconv"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	ociexec "github.com/staticpodd/staticpodd/oci/exec"
	mon "github.com/staticpodd/staticpodd/oci/monitor"
	"github.com/staticpodd/staticpodd/oci/sandbox"
	"github.com/staticpodd/staticpodd/oci/spec"
)

// debugDir, under RunDir, has a state dir per debug container running: its
// spec, whose cgroup path the clean-up needs. Its libcontainer state is
// under libcontainerDir and its rootfs is the snapshot of its ID, as a
// container's; it is never under containersDir, so that List, and so the
// agent, never takes it for one of the pod's containers.
const debugDir = "debug"

// Debug runs c in the sandbox of pod as an ephemeral container, as
// `kubectl debug` does: the pod's network, IPC and UTS namespaces, and the
// PID namespace of container target (its runtime ID) if not empty, else a
// PID namespace of its own; a fresh rootfs over c's image; a cgroup under
// the pod's. Its process is es.Cmd, streamed as Exec streams one; it is the
// daemon's child, with no monitor, since it lives only as long as the
// request; started, if not nil, is told the container's ID once it runs.
// Debug returns its exit code once it has exited, or once ctx ended (then it
// is killed), and every trace of the container is gone by then. An image
// missing from the store is ErrImageNotPresent, a pod without a sandbox
// ErrNotExist, a target not running ErrNotRunning.
//
// Close ends it too. A daemon that dies meanwhile leaves the container; the
// next one removes it as it starts (removeDebugLeftovers).
func (r *Runtime) Debug(ctx context.Context, pod *podspec.Pod, c *podspec.Container, target string, es podspec.ExecSpec, started func(id string)) (int, error) {
	if len(es.Cmd) == 0 {
		return -1, fmt.Errorf("debug container %s: no command", c.Name)
	}
	id := newID()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return -1, fmt.Errorf("debug container %s: %w", c.Name, errClosed)
	}
	if r.debugs == nil {
		r.debugs = map[string]context.CancelCauseFunc{}
	}
	r.debugs[id] = cancel
	r.debugging.Add(1)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.debugs, id)
		r.mu.Unlock()
		r.debugging.Done()
	}()
	return r.debug(ctx, id, pod, c, target, es, started)
}

// errClosed ends the debug containers of a Runtime being closed.
var errClosed = errors.New("the runtime is closing: the daemon stops")

func (r *Runtime) debug(ctx context.Context, id string, pod *podspec.Pod, c *podspec.Container, target string, es podspec.ExecSpec, started func(string)) (int, error) {
	pr, err := r.sb.Record(pod.UID)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			err = podspec.ErrNotExist
		}
		return -1, fmt.Errorf("debug container %s of pod %s: sandbox: %w", c.Name, pod.Name, err)
	}
	if _, err := r.cfg.Images.Get(c.Image); err != nil {
		return -1, fmt.Errorf("debug container %s of pod %s: %w", c.Name, pod.Name, err)
	}
	pidNS := ""
	if target != "" {
		ns, err := r.targetPIDNamespace(ctx, target)
		if err != nil {
			return -1, fmt.Errorf("debug container %s of pod %s: target: %w", c.Name, pod.Name, err)
		}
		defer ns.Close()
		// The namespace held open, not the target's pid, which a target
		// that exits meanwhile would give up to any process.
		pidNS = "/proc/" + strconv.Itoa(os.Getpid()) + "/fd/" + strconv.Itoa(int(ns.Fd()))
	}
	dir := filepath.Join(r.cfg.RunDir, debugDir, id)
	defer func() {
		if err := r.removeDebug(id); err != nil {
			r.log.Warn("remove debug container", "id", id, "pod", pod.Name, "err", err)
		}
	}()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return -1, err
	}
	// The spec first: a daemon that dies from here on leaves what
	// removeDebug finds by it.
	cgroupsPath := containerCgroupsPath(pr.CgroupsPath, id)
	if err := writeJSON(filepath.Join(dir, specFile), specs.Spec{Linux: &specs.Linux{CgroupsPath: cgroupsPath}}); err != nil {
		return -1, err
	}
	rootfs, img, err := r.cfg.Images.Prepare(id, startImage(c))
	if err != nil {
		return -1, fmt.Errorf("prepare rootfs from %s: %w", c.Image, err)
	}
	s, err := spec.Generate(pod, c, img.Config, rootfs, r.sb.Join(pr, cgroupsPath))
	if err != nil {
		return -1, fmt.Errorf("%w: %w", podspec.ErrContainerConfig, err)
	}
	if pidNS != "" {
		for i, ns := range s.Linux.Namespaces {
			if ns.Type == specs.PIDNamespace {
				s.Linux.Namespaces[i].Path = pidNS
			}
		}
	}
	s.Process.Terminal = es.TTY
	// The file without the values of sensitive variables (mon.SealEnv):
	// only removeDebug reads it. The init gets s, with them.
	sealed, proc := *s, *s.Process
	proc.Env, _ = mon.SealEnv(s.Process.Env, sensitiveNames(c.Env))
	sealed.Process = &proc
	if err := writeJSON(filepath.Join(dir, specFile), &sealed); err != nil {
		return -1, err
	}
	cfg, err := specconv.CreateLibcontainerConfig(&specconv.CreateOpts{
		CgroupName:       id,
		UseSystemdCgroup: isSystemdCgroupsPath(cgroupsPath),
		Spec:             s,
	})
	if err != nil {
		return -1, fmt.Errorf("%w: %w", podspec.ErrContainerConfig, err)
	}
	if err := ctx.Err(); err != nil {
		return -1, context.Cause(ctx)
	}
	r.warmer.warm()
	ctr, err := libcontainer.Create(r.libcontainerRoot(), id, cfg)
	if err != nil {
		return -1, fmt.Errorf("create debug container %s: %w", c.Name, err)
	}
	r.log.Info("debug container starting", "id", id, "pod", pod.Name, "container", c.Name, "image", c.Image, "target", target)
	return ociexec.RunInit(ctx, ctr, s.Process, es, dir, r.log, func() {
		if started != nil {
			started(id)
		}
	})
}

// targetPIDNamespace opens the PID namespace of running container id's init.
// The init is checked to run still once its namespace is open: its pid was
// not reused meanwhile, and the namespace is its.
func (r *Runtime) targetPIDNamespace(ctx context.Context, id string) (*os.File, error) {
	st, err := r.status(ctx, id)
	if err != nil {
		return nil, err
	}
	if st.State != podspec.StateRunning || st.Pid <= 0 {
		return nil, fmt.Errorf("%s: %w", st.Name, podspec.ErrNotRunning)
	}
	f, err := os.Open("/proc/" + strconv.Itoa(st.Pid) + "/ns/pid")
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", st.Name, podspec.ErrNotRunning, err)
	}
	if again, err := r.status(ctx, id); err != nil || again.State != podspec.StateRunning || again.Pid != st.Pid {
		f.Close()
		return nil, fmt.Errorf("%s: %w: it exited", st.Name, podspec.ErrNotRunning)
	}
	return f, nil
}

// stopDebugs ends the debug containers running and waits until they are
// removed: they live only as long as their requests, which end with the
// daemon. Called by Close, once no Debug can begin.
func (r *Runtime) stopDebugs() {
	r.mu.Lock()
	for _, cancel := range r.debugs {
		cancel(errClosed)
	}
	r.mu.Unlock()
	r.debugging.Wait()
}

// removeDebug removes every trace of debug container id: its processes,
// libcontainer state, cgroup, rootfs and state dir, the dir last so that a
// daemon dying half-way leaves it to be found again.
func (r *Runtime) removeDebug(id string) error {
	var errs []error
	if ctr, err := libcontainer.Load(r.libcontainerRoot(), id); err == nil {
		// In a target's PID namespace, the init's death does not end the
		// processes it started: SignalContainer kills the cgroup's.
		_ = mon.SignalContainer(ctr, unix.SIGKILL)
		// libcontainer destroys only a stopped container; a leftover's init,
		// a child of the daemon that died, is reaped by whoever adopted it.
		for end := time.Now().Add(killWait); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if st, err := ctr.Status(); err != nil || st == libcontainer.Stopped {
				break
			}
		}
		errs = append(errs, ctr.Destroy())
	} else if errors.Is(err, libcontainer.ErrNotExist) {
		errs = append(errs, os.RemoveAll(filepath.Join(r.libcontainerRoot(), id)))
	} else {
		errs = append(errs, err)
	}
	dir := filepath.Join(r.cfg.RunDir, debugDir, id)
	var s specs.Spec
	if ok, err := readOptionalJSON(filepath.Join(dir, specFile), &s); err != nil {
		errs = append(errs, err)
	} else if ok && s.Linux != nil && s.Linux.CgroupsPath != "" {
		errs = append(errs, sandbox.RemoveCgroup(s.Linux.CgroupsPath))
	}
	errs = append(errs, r.cfg.Images.Release(id))
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// removeDebugLeftovers removes the debug containers an earlier daemon left
// when it died, before removeOrphans would take their snapshots and
// libcontainer state for orphans without their cgroup.
func (r *Runtime) removeDebugLeftovers(ctx context.Context) error {
	entries, err := os.ReadDir(filepath.Join(r.cfg.RunDir, debugDir))
	if err != nil {
		if !errors.Is(err, fs.ErrNotExist) {
			r.log.Warn("list debug containers left", "err", err)
		}
		return nil
	}
	for _, e := range entries {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		r.log.Info("remove the debug container an earlier daemon left", "id", e.Name())
		if err := r.removeDebug(e.Name()); err != nil {
			r.log.Warn("remove debug container left", "id", e.Name(), "err", err)
		}
	}
	return nil
}
