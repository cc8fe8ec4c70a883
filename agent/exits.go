package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/status"
)

// reasonStartError is the runtime's reason for a container whose process
// could not be started.
const reasonStartError = "StartError"

// exited takes the exit of a container the worker did not stop: it is logged
// with what comes next, and a start that failed is an event, as the
// kubelet's startContainer records it.
func (w *worker) exited(c podspec.ContainerStatus) {
	w.logExit(c, false)
	if c.Reason == reasonStartError {
		if pod := w.podOf(c.PodUID); pod != nil {
			w.a.events.Eventf(events.ContainerRef(pod, c.Name), v1.EventTypeWarning, events.Failed, "Error: %s", c.Message)
		}
	}
}

// logExit writes a container's exit to the log, with why it exited and
// whether and when it will be restarted, so that the daemon's log alone
// tells why a pod restarts. stopped: the worker stopped it.
func (w *worker) logExit(c podspec.ContainerStatus, stopped bool) {
	attrs := []any{"container", c.Name, "id", c.ID, "exitCode", c.ExitCode, "reason", status.Terminated(c).Reason}
	if sig := exitSignal(c.ExitCode); sig != "" {
		attrs = append(attrs, "signal", sig)
	}
	if c.Message != "" {
		attrs = append(attrs, "message", c.Message)
	}
	attrs = append(attrs, "restartCount", c.Attempt, "restart", w.nextRestart(c, stopped))
	level := slog.LevelInfo
	if c.ExitCode != 0 && !stopped {
		level = slog.LevelWarn
	}
	w.logger.Log(context.Background(), level, "container exited", attrs...)
}

// exitSignal names the signal of an exit code 128+N, the code of a process
// killed by signal N (the runtime records it so, as the shell does).
func exitSignal(code int) string {
	if code <= 128 || code > 128+64 {
		return ""
	}
	return unix.SignalName(syscall.Signal(code - 128))
}

// nextRestart says what the worker will do about an exited container: "now",
// "in 40s" (the crash-loop back-off), or "no: " and why.
func (w *worker) nextRestart(c podspec.ContainerStatus, stopped bool) string {
	w.mu.Lock()
	pod := w.box.desired
	w.mu.Unlock()
	if pod == nil || string(pod.UID) != c.PodUID || w.gen == nil || w.gen.uid != c.PodUID {
		return "no: the pod is being removed or replaced"
	}
	spec := findContainer(pod, c.Name)
	if spec == nil {
		return "no: not in the pod's spec"
	}
	hash := w.gen.hashes[c.Name]
	if hash == "" {
		return "no: the container's spec is invalid"
	}
	if c.Hash != hash {
		return "now: its spec changed"
	}
	policy := pod.Spec.RestartPolicy
	init := false
	for _, ic := range pod.Spec.InitContainers {
		init = init || ic.Name == c.Name
	}
	unhealthy, hookFailed := false, false
	if st := w.pods[c.PodUID]; st != nil {
		unhealthy = st.unhealthy[c.ID] != ""
		hookFailed = st.hookFailed[c.ID]
	}
	switch {
	case w.gen.state() != podSyncing:
		return "no: the pod is stopped (" + w.gen.stop.reason + ")"
	case !stopped && status.RestartsAll(spec, c.ExitCode):
		return "now, with all the pod's containers: a RestartAllContainers rule matched"
	case init && c.ExitCode == 0 && !unhealthy:
		return "no: init container completed"
	case unhealthy && !restartsAfterKill(spec, policy):
		return "no: restartPolicy Never"
	case !unhealthy && !shouldRestart(spec, policy, c.ExitCode):
		return "no: " + noRestart(spec, policy, c.ExitCode)
	case stopped && !unhealthy && !hookFailed:
		// Killed for a failed postStart, it restarts per policy.
		return "no: stopped"
	}
	key := backoffKey(c.PodUID, c.Name, hash)
	if _, d := w.backoff.wait(key, c.FinishedAt, c.FinishedAt); d > 0 {
		return fmt.Sprintf("in %s", d)
	}
	return "now"
}

// noRestart says why c, exited with exitCode, is not started again under
// its restartPolicy, or the pod's (policy) if it has none.
func noRestart(c *v1.Container, policy v1.RestartPolicy, exitCode int) string {
	p := string(policy)
	if c.RestartPolicy != nil {
		p = string(*c.RestartPolicy)
	}
	why := "restartPolicy " + p
	if exitCode == 0 && p == string(v1.RestartPolicyOnFailure) {
		why = "completed, " + why
	}
	if len(c.RestartPolicyRules) > 0 {
		why += ", no restartPolicyRules matched"
	}
	return why
}

// podOf is the pod a UID of the worker is: the desired one, or an older
// generation being stopped; nil if the worker shows none.
func (w *worker) podOf(uid string) *v1.Pod {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.box.desired != nil && string(w.box.desired.UID) == uid {
		return w.box.desired
	}
	if p := w.a.statuses.Stopping(w.key, uid); p != nil {
		return p
	}
	if p := w.a.statuses.Desired(w.key); p != nil && string(p.UID) == uid {
		return p
	}
	return nil
}

// watch reports the container's exit to the worker, once it is due.
func (w *worker) watch(ctx context.Context, id string) {
	if w.watching[id] {
		return
	}
	w.watching[id] = true
	wait := func() {
		if ctx.Err() != nil {
			return // the worker stops: no exit to hand it
		}
		st, err := w.waitExit(ctx, id)
		if err != nil {
			return
		}
		select {
		case w.exits <- &st:
		case <-ctx.Done():
		}
	}
	if n, ok := w.a.rt.(ExitNotifier); ok {
		// No goroutine while the container runs: wait is called when its
		// monitor has exited (or ctx ended), and Wait then returns at once.
		w.waiters.Add(1)
		n.AfterExit(ctx, id, func() {
			defer w.waiters.Done()
			wait()
		})
		return
	}
	w.waiters.Go(wait)
}

// ExitNotifier is a Runtime that calls a function when a container's exit
// is due rather than making its caller block in Wait (oci.Runtime.AfterExit):
// a goroutine parked in Wait per running container was, with its stack,
// the daemon's largest cost per pod at rest after its heap.
type ExitNotifier interface {
	AfterExit(ctx context.Context, id string, f func())
}

// waitExit waits for a container to exit, retrying a failing Wait every 10s. A
// container that vanished is reported exited as the kubelet does
// (ContainerStatusUnknown, 137), so its pod worker can go on.
func (w *worker) waitExit(ctx context.Context, id string) (podspec.ContainerStatus, error) {
	for {
		st, err := w.a.rt.Wait(ctx, id)
		switch {
		case err == nil:
			if st.ID == "" {
				st.ID = id
			}
			return st, nil
		case ctx.Err() != nil:
			return st, ctx.Err()
		case errors.Is(err, podspec.ErrNotExist):
			return podspec.ContainerStatus{ID: id, State: podspec.StateExited, ExitCode: 137,
				Reason: "ContainerStatusUnknown", Message: "The container could not be located", FinishedAt: time.Now()}, nil
		}
		w.logger.Warn("wait for container failed, retrying", "container", id, "err", err)
		t := time.NewTimer(backoffInitial)
		select {
		case <-ctx.Done():
			t.Stop()
			return podspec.ContainerStatus{}, ctx.Err()
		case <-t.C:
		}
	}
}

// record takes a new runtime status for a container the worker knows, and
// returns it with what was known before, and whether it has exited now.
func (w *worker) record(st podspec.ContainerStatus) (podspec.ContainerStatus, bool) {
	for _, ps := range w.pods {
		for i := range ps.containers {
			c := &ps.containers[i]
			if c.ID != st.ID {
				continue
			}
			was := c.State
			merged := st
			keepLabels(&merged, *c)
			*c = merged
			if merged.State == podspec.StateExited {
				delete(w.watching, c.ID)
				// Nothing left to run it in: it exited, and restarts (or
				// not) as any exited container.
				w.hooks.Cancel(c.ID)
			}
			return merged, was != podspec.StateExited && merged.State == podspec.StateExited
		}
	}
	return st, false
}

// keepLabels fills what a runtime status left empty from what was known before.
func keepLabels(st *podspec.ContainerStatus, old podspec.ContainerStatus) {
	if st.PodUID == "" {
		st.PodUID = old.PodUID
	}
	if st.PodName == "" {
		st.PodName = old.PodName
	}
	if st.Name == "" {
		st.Name = old.Name
	}
	if st.Hash == "" {
		st.Hash = old.Hash
	}
	if st.Attempt == 0 {
		st.Attempt = old.Attempt
	}
	if st.Image == "" {
		st.Image = old.Image
	}
	if st.ImageID == "" {
		st.ImageID, st.ImageRef = old.ImageID, old.ImageRef
	}
	if st.StartedAt.IsZero() {
		st.StartedAt = old.StartedAt
	}
	if st.CreatedAt.IsZero() {
		st.CreatedAt = old.CreatedAt
	}
	if st.StopSignal == 0 {
		st.StopSignal = old.StopSignal
	}
	if st.Annotations == nil {
		st.Annotations = old.Annotations
	}
}
