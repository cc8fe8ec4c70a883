package agent

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/lifecycle"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// A postStart hook runs in a goroutine of its own, so that the pod's worker
// goes on publishing status, recording exits and taking updates meanwhile;
// but until it is done no other container of the pod is started, as the
// kubelet's pod worker waits for it (kuberuntime startContainer, step 4), and
// the container is neither started nor probed. A failed one has the
// container killed and restarted per restartPolicy, waiting with
// PostStartHookError. A preStop hook runs in the container's kill, before
// its stop signal, and its time comes out of the grace period
// (kuberuntime killContainer).

// hookRun is a postStart hook that runs; owned by the worker goroutine.
type hookRun struct {
	uid, name string
	attempt   int
	cancel    context.CancelFunc
}

// hookResult is how a postStart hook ended, for the worker goroutine.
type hookResult struct {
	run *hookRun
	id  string
	msg string
	err error
}

// podHost is where probes and hooks connect when they name no host: the pod
// IP of a hostNetwork pod (the node's), else 127.0.0.1, which a pod with its
// own network namespace has.
func (w *worker) podHost(pod *v1.Pod) string {
	if pod.Spec.HostNetwork && w.a.cfg.NodeIP.IsValid() {
		return w.a.cfg.NodeIP.String()
	}
	return "127.0.0.1"
}

// hookTarget is how hooks reach container c (runtime ID id) of pod: execs
// through the runtime, connections from the pod's network namespace.
func (w *worker) hookTarget(pod *v1.Pod, c *v1.Container, id string) lifecycle.Target {
	uid := string(pod.UID)
	rt := w.a.rt
	return lifecycle.Target{
		Container: c,
		Host:      w.podHost(pod),
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return rt.Dial(ctx, uid, network, addr)
		},
		Exec: func(ctx context.Context, cmd []string, stdout, stderr io.Writer) (int, error) {
			return rt.Exec(ctx, id, podspec.ExecSpec{Cmd: cmd, Stdout: stdout, Stderr: stderr})
		},
	}
}

func hasPostStart(c *v1.Container) bool { return c.Lifecycle != nil && c.Lifecycle.PostStart != nil }

// runPostStart starts the postStart hook of container c, just started as cs.
func (w *worker) runPostStart(ctx context.Context, pod *v1.Pod, c *v1.Container, cs podspec.ContainerStatus) {
	ctx, cancel := context.WithCancel(ctx)
	run := &hookRun{uid: string(pod.UID), name: c.Name, attempt: cs.Attempt, cancel: cancel}
	w.postStarts[cs.ID] = run
	w.hookChecked[cs.ID] = true
	h, target, podName := c.Lifecycle.PostStart, w.hookTarget(pod, c, cs.ID), formatPod(pod)
	logger := w.logger.With("container", c.Name, "id", cs.ID)
	logger.Info("running postStart hook")
	go func() {
		msg, err := lifecycle.Run(ctx, h, target, podName, logger)
		if ctx.Err() != nil {
			return // the container is being stopped, or the daemon
		}
		select {
		case w.hookDone <- hookResult{run: run, id: cs.ID, msg: msg, err: err}:
		case <-ctx.Done():
		}
	}()
}

// postStartDone takes the end of a postStart hook: the container has
// started, or is to be killed.
func (w *worker) postStartDone(r hookResult) {
	if w.postStarts[r.id] != r.run {
		return // cancelled meanwhile
	}
	delete(w.postStarts, r.id)
	r.run.cancel()
	if r.err == nil {
		w.logger.Info("postStart hook done", "container", r.run.name, "id", r.id)
		if err := w.a.marks.Clear(r.run.uid, r.run.name, r.run.attempt); err != nil {
			w.logger.Warn("cannot clear postStart mark; a daemon restart runs the hook again", "container", r.run.name, "err", err)
		}
		return
	}
	// The mark stays: a daemon that dies before the container is killed
	// runs the hook again rather than take it as started. Once the
	// container is gone it matches nothing, and goes with the pod's
	// directory.
	w.logger.Warn("postStart hook failed, killing container", "reason", reasonFailedPostStart,
		"container", r.run.name, "id", r.id, "message", r.msg)
	if pod := w.podOf(r.run.uid); pod != nil {
		// Without the message, which may hold secrets (the kubelet's).
		w.a.events.Eventf(events.ContainerRef(pod, r.run.name), v1.EventTypeWarning, events.FailedPostStartHook, "PostStartHook failed")
	}
	if st := w.pods[r.run.uid]; st != nil {
		if st.hookFailed == nil {
			st.hookFailed = map[string]bool{}
		}
		st.hookFailed[r.id] = true
	}
	if w.gen != nil && w.gen.uid == r.run.uid {
		ci := w.info(r.run.name)
		ci.reason, ci.message = reasonPostStartHookError, r.msg
	}
}

// cancelPostStart stops the postStart hook of container id, if one runs:
// the container is being stopped.
func (w *worker) cancelPostStart(id string) {
	if run := w.postStarts[id]; run != nil {
		run.cancel()
		delete(w.postStarts, id)
	}
}

// postStarting reports whether a postStart hook of pod uid runs.
func (w *worker) postStarting(uid string) bool {
	for _, run := range w.postStarts {
		if run.uid == uid {
			return true
		}
	}
	return false
}

// syncPostStarts runs again the postStart hook of each running container of
// pod that a daemon started, marked, and died before the hook was done: the
// hook's process died with that daemon, and hooks are delivered at least
// once. Each container is looked at once.
func (w *worker) syncPostStarts(ctx context.Context, pod *v1.Pod) {
	if pod == nil || w.gen == nil || w.gen.uid != string(pod.UID) {
		return
	}
	uid := string(pod.UID)
	st := w.pods[uid]
	if st == nil {
		return
	}
	for _, l := range latestByName(st.containers) {
		if l.State != podspec.StateRunning || w.postStarts[l.ID] != nil || w.hookChecked[l.ID] {
			continue
		}
		w.hookChecked[l.ID] = true
		c := findContainer(pod, l.Name)
		if c == nil || !hasPostStart(c) || l.Hash != w.gen.hashes[c.Name] || !w.a.marks.Marked(uid, l.Name, l.Attempt) {
			continue
		}
		w.logger.Info("postStart hook was cut short by a daemon restart, running it again", "container", l.Name, "id", l.ID)
		w.runPostStart(ctx, pod, c, l)
	}
}

// markHooks hands plan the pods whose postStart hooks run, and counts their
// containers as not started; after markProbes.
func (w *worker) markHooks() {
	for _, st := range w.pods {
		st.postStarting = false
	}
	for id, run := range w.postStarts {
		st := w.pods[run.uid]
		if st == nil {
			continue
		}
		st.postStarting = true
		if st.unstarted == nil {
			st.unstarted = map[string]bool{}
		}
		st.unstarted[id] = true
	}
}

// preStop is a container's preStop hook, ready to run in its kill.
type preStop struct {
	h      *v1.LifecycleHandler
	target lifecycle.Target
	pod    string // format.Pod
	ref    v1.ObjectReference
	logger *slog.Logger
}

// preStopOf returns the preStop hook to run before the kill act, if its
// container is running and the spec of its pod (the desired one, or an older
// generation being stopped) has one.
func (w *worker) preStopOf(act action) *preStop {
	st, pod := w.pods[act.podUID], w.podOf(act.podUID)
	if st == nil || pod == nil {
		return nil
	}
	running := false
	for _, c := range st.containers {
		running = running || (c.ID == act.id && c.State == podspec.StateRunning)
	}
	c := findContainer(pod, act.container)
	if !running || c == nil || c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		return nil
	}
	return &preStop{h: c.Lifecycle.PreStop, target: w.hookTarget(pod, c, act.id), pod: formatPod(pod),
		ref: events.ContainerRef(pod, act.container), logger: w.logger.With("container", act.container, "id", act.id)}
}

// runPreStop runs hook p of container id for at most grace, and returns
// early if the container exits meanwhile, with its status (exited).
func (w *worker) runPreStop(ctx context.Context, id string, p *preStop, grace time.Duration) (st podspec.ContainerStatus, exited bool) {
	p.logger.Info("running preStop hook", "grace", grace)
	hctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	exit := make(chan podspec.ContainerStatus, 1)
	go func() {
		if st, err := w.a.rt.Wait(hctx, id); err == nil {
			exit <- st
			cancel() // nothing left to prepare for stopping
		}
	}()
	msg, err := lifecycle.Run(hctx, p.h, p.target, p.pod, p.logger)
	select {
	case st := <-exit:
		if st.ID == "" {
			st.ID = id
		}
		st.State = podspec.StateExited
		p.logger.Info("container exited during its preStop hook")
		return st, true
	default:
	}
	switch {
	case ctx.Err() != nil:
	case errors.Is(hctx.Err(), context.DeadlineExceeded):
		p.logger.Info("preStop hook not completed in grace period", "grace", grace)
	case err != nil:
		p.logger.Warn("preStop hook failed", "reason", events.FailedPreStopHook, "message", msg)
		w.a.events.Eventf(p.ref, v1.EventTypeWarning, events.FailedPreStopHook, "PreStopHook failed")
	}
	return st, false
}

// postStartMarks remember, across daemon restarts, which containers have a
// postStart hook that has not succeeded yet: marked before the container
// starts, cleared once its hook is done, so that a daemon that dies during a
// hook leaves the next one a mark to run it again by. A container is named by
// its pod UID, name and attempt, known before it starts.
type postStartMarks interface {
	Mark(uid, container string, attempt int) error
	Clear(uid, container string, attempt int) error
	Marked(uid, container string, attempt int) bool
}

// fileMarks keeps marks as empty files in <RootDir>/pods/<uid>/poststart/,
// which go with the pod's directory.
type fileMarks struct{ paths manifest.Paths }

func (m fileMarks) file(uid, name string, attempt int) string {
	return poddir.Root(m.paths.RootDir).PostStartMark(uid, name, attempt)
}

func (m fileMarks) Mark(uid, name string, attempt int) error {
	f := m.file(uid, name, attempt)
	if err := os.MkdirAll(filepath.Dir(f), 0o700); err != nil {
		return fmt.Errorf("mark postStart of container %s: %w", name, err)
	}
	if err := os.WriteFile(f, nil, 0o600); err != nil {
		return fmt.Errorf("mark postStart of container %s: %w", name, err)
	}
	return nil
}

func (m fileMarks) Clear(uid, name string, attempt int) error {
	if err := os.Remove(m.file(uid, name, attempt)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("clear postStart mark of container %s: %w", name, err)
	}
	return nil
}

func (m fileMarks) Marked(uid, name string, attempt int) bool {
	_, err := os.Lstat(m.file(uid, name, attempt))
	return err == nil
}

// noMarks remembers nothing: without a root dir, a hook cut short by a
// daemon restart is taken as done, as the kubelet does.
type noMarks struct{}

func (noMarks) Mark(string, string, int) error  { return nil }
func (noMarks) Clear(string, string, int) error { return nil }
func (noMarks) Marked(string, string, int) bool { return false }
