package agent

import (
	"context"
	"io"
	"net"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/lifecycle"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/status"
)

// The worker decides when a container's hooks run; agent/lifecycle runs
// them. A postStart hook holds the pod's other starts until it is done
// (lifecycle.PostStarts); a preStop hook runs in the container's kill,
// before its stop signal (lifecycle.PreStop).

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

// runPostStart starts the postStart hook of container c, just started as cs.
func (w *worker) runPostStart(ctx context.Context, pod *v1.Pod, c *v1.Container, cs podspec.ContainerStatus) {
	w.hooks.Start(ctx, lifecycle.PostStart{PodUID: string(pod.UID), ID: cs.ID, Attempt: cs.Attempt,
		Hook: c.Lifecycle.PostStart, Target: w.hookTarget(pod, c, cs.ID), Pod: formatPod(pod)})
}

// postStartDone takes the end of a postStart hook: the container has
// started, or is to be killed.
func (w *worker) postStartDone(r lifecycle.PostStartResult) {
	f, ok := w.hooks.Finish(r)
	if !ok || !f.Failed {
		return
	}
	w.logger.Warn("postStart hook failed, killing container", "reason", reasonFailedPostStart,
		"container", f.Container, "id", f.ID, "message", f.Message)
	if pod := w.podOf(f.PodUID); pod != nil {
		// Without the message, which may hold secrets (the kubelet's).
		w.a.events.Eventf(events.ContainerRef(pod, f.Container), v1.EventTypeWarning, events.FailedPostStartHook, "PostStartHook failed")
	}
	if st := w.pods[f.PodUID]; st != nil {
		if st.hookFailed == nil {
			st.hookFailed = map[string]bool{}
		}
		st.hookFailed[f.ID] = true
	}
	if w.gen != nil && w.gen.uid == f.PodUID {
		ci := w.info(f.Container)
		ci.reason, ci.message = reasonPostStartHookError, f.Message
	}
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
	for i := range st.containers {
		l := st.containers[i]
		if status.LatestIndex(st.containers, l.Name) != i || l.State != podspec.StateRunning || !w.hooks.Check(l.ID) {
			continue
		}
		c := findContainer(pod, l.Name)
		if c == nil || !lifecycle.HasPostStart(c) || l.Hash != w.gen.hashes[c.Name] || !w.hooks.CutShort(uid, l.Name, l.Attempt) {
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
	for id, uid := range w.hooks.All() {
		st := w.pods[uid]
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

// preStopOf returns the preStop hook to run before the kill act, if its
// container is running and the spec of its pod (the desired one, or an older
// generation being stopped) has one. A kill that restarts all the pod's
// containers runs none: the kubelet kills them with no grace period, which
// skips the hook.
func (w *worker) preStopOf(act action) *lifecycle.PreStop {
	st, pod := w.pods[act.podUID], w.podOf(act.podUID)
	if st == nil || pod == nil || act.restartAll {
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
	ref, id := events.ContainerRef(pod, act.container), act.id
	return &lifecycle.PreStop{Hook: c.Lifecycle.PreStop, Target: w.hookTarget(pod, c, id), Pod: formatPod(pod),
		Logger: w.logger.With("container", act.container, "id", id),
		Wait:   func(ctx context.Context) (podspec.ContainerStatus, error) { return w.a.rt.Wait(ctx, id) },
		Failed: func() {
			w.a.events.Eventf(ref, v1.EventTypeWarning, events.FailedPreStopHook, "PreStopHook failed")
		}}
}
