package agent

import (
	"context"
	"fmt"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// ExecTarget returns the runtime ID of container in the pod namespace/name (its
// full name), init containers included, if it is running. An unknown pod or
// container is an error wrapping podspec.ErrNotExist; a container that is not
// running one wrapping podspec.ErrNotRunning, saying what it is instead.
func (a *Agent) ExecTarget(namespace, name, container string) (string, error) {
	return a.published().execTarget(namespace, name, container)
}

// ExecTargetOf is ExecTarget for pod, one that Pods listed (the exec by name
// found it there): an exec pays for one copy of the node's pods, not two.
func (a *Agent) ExecTargetOf(pod *v1.Pod, container string) (string, error) {
	return podSet{pods: []v1.Pod{*pod}}.execTarget(pod.Namespace, pod.Name, container)
}

func (v podSet) execTarget(namespace, name, container string) (string, error) {
	pod := v.find(namespace, name)
	if pod == nil {
		return "", fmt.Errorf("pod %s/%s: %w", namespace, name, podspec.ErrNotExist)
	}
	if findContainer(pod, container) == nil {
		return "", fmt.Errorf("pod %s/%s has no container %q: %w", namespace, name, container, podspec.ErrNotExist)
	}
	var cs *v1.ContainerStatus
	for _, s := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
		if s.Name == container {
			cs = &s
		}
	}
	if cs == nil || cs.State.Running == nil || cs.ContainerID == "" || pod.DeletionTimestamp != nil {
		return "", &notRunningError{fmt.Sprintf("container %q of pod %s/%s is not running: it is %s",
			container, namespace, name, describeState(pod, cs))}
	}
	return strings.TrimPrefix(cs.ContainerID, containerIDPrefix), nil
}

// Exec runs spec in the running container id; see Runtime.Exec.
func (a *Agent) Exec(ctx context.Context, id string, spec podspec.ExecSpec) (int, error) {
	return a.rt.Exec(ctx, id, spec)
}

// notRunningError is podspec.ErrNotRunning with a message of its own.
type notRunningError struct{ msg string }

func (e *notRunningError) Error() string { return e.msg }
func (e *notRunningError) Unwrap() error { return podspec.ErrNotRunning }

// describeState says what a container that is not running is, as kubectl
// describe would: waiting (reason), terminated (reason, exit code).
func describeState(pod *v1.Pod, cs *v1.ContainerStatus) string {
	switch {
	case pod.DeletionTimestamp != nil:
		return "terminating with its pod"
	case cs == nil:
		return "not created yet"
	case cs.State.Waiting != nil:
		return "waiting (" + cmp(cs.State.Waiting.Reason, "no reason") + ")"
	case cs.State.Terminated != nil:
		t := cs.State.Terminated
		return fmt.Sprintf("terminated (%s, exit code %d)", cmp(t.Reason, "no reason"), t.ExitCode)
	}
	return "not running"
}

// cmp is s, or def when s is empty.
func cmp(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
