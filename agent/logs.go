package agent

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

// ErrNoLogs: the container has no log file (yet, or no previous one).
var ErrNoLogs = errors.New("no logs")

// LogFile returns the CRI log file of container in the pod namespace/name (its
// full name): the run the kubelet's validateContainerLogStatus picks from the
// container's status, which is the last run that ended (lastState) with
// previous, else the running one, the one that ended, or the last one while the
// container waits to start again (a crash loop's back-off). Files are
// <LogDir>/<container>/<attempt>.log, and rotation makes
// <attempt>.log.<time>[.gz] of them (logfiles.RotatedLogs): a run with only
// those still has its <attempt>.log returned.
func (a *Agent) LogFile(ctx context.Context, namespace, name, container string, previous bool) (string, error) {
	return a.published().logFile(ctx, namespace, name, container, previous)
}

func (v podSet) logFile(ctx context.Context, namespace, name, container string, previous bool) (string, error) {
	pod := v.find(namespace, name)
	if pod == nil {
		return "", fmt.Errorf("pod %s/%s: %w", namespace, name, ErrNoLogs)
	}
	if findContainer(pod, container) == nil {
		return "", fmt.Errorf("pod %s/%s has no container %q: %w", namespace, name, container, ErrNoLogs)
	}
	id, err := logContainerID(pod, container, previous)
	if err != nil {
		return "", fmt.Errorf("%w: %w", err, ErrNoLogs)
	}
	podDir := v.logDir(pod)
	if podDir == "" {
		return "", fmt.Errorf("pod %s/%s has no log directory recorded: %w", namespace, name, ErrNoLogs)
	}
	dir := filepath.Join(podDir, container)
	cs, err := v.containers(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of container %s of pod %s/%s: %w", container, namespace, name, err)
	}
	for _, c := range cs {
		if c.ID == id {
			return filepath.Join(dir, logfiles.LogFileName(c.Attempt)), nil
		}
	}
	// Not in the runtime: the instance the newest one replaced (the worker
	// removes it then, keeping its logs), whose run is the newest below the
	// newest instance's, its restart count. Beneath podLogsDir through no
	// symlink: a container that mounts it may have swapped its directory
	// for one to a host directory.
	runs, err := logfiles.Runs(dir)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("logs of container %s of pod %s/%s: %w", container, namespace, name, err)
	}
	newest := restartCount(pod, container)
	for _, r := range slices.Backward(runs) {
		if r < newest {
			return filepath.Join(dir, logfiles.LogFileName(r)), nil
		}
	}
	return "", fmt.Errorf("container %s of pod %s/%s has no logs of its run %s: %w", container, namespace, name, id, ErrNoLogs)
}

// restartCount is the container's status's: its newest instance's run.
func restartCount(pod *v1.Pod, container string) int {
	for _, cs := range slices.Concat(pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses) {
		if cs.Name == container {
			return int(cs.RestartCount)
		}
	}
	return 0
}

// logContainerID is the ID of the container whose logs are asked for, as the
// kubelet's validateContainerLogStatus (pkg/kubelet/kubelet_pods.go) picks it,
// with its errors.
func logContainerID(pod *v1.Pod, container string, previous bool) (string, error) {
	var cs *v1.ContainerStatus
	for _, c := range slices.Concat(pod.Status.ContainerStatuses, pod.Status.InitContainerStatuses) {
		if c.Name == container {
			cs = &c
		}
	}
	podName := pod.Namespace + "/" + pod.Name
	if cs == nil {
		return "", fmt.Errorf("container %q in pod %q is not available", container, podName)
	}
	last := cs.LastTerminationState.Terminated
	waiting, running, terminated := cs.State.Waiting, cs.State.Running, cs.State.Terminated
	var id string
	switch {
	case previous:
		if last == nil || last.ContainerID == "" {
			return "", fmt.Errorf("previous terminated container %q in pod %q not found", container, podName)
		}
		id = last.ContainerID
	case running != nil:
		id = cs.ContainerID
	case terminated != nil:
		// The next run did not start: the one before it.
		id = terminated.ContainerID
		if id == "" && last != nil {
			id = last.ContainerID
		}
		if id == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", container, podName)
		}
	case last != nil:
		if last.ContainerID == "" {
			return "", fmt.Errorf("container %q in pod %q is terminated", container, podName)
		}
		id = last.ContainerID
	case waiting != nil:
		switch waiting.Reason {
		case "ErrImagePull":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: image can't be pulled", container, podName)
		case "ImagePullBackOff":
			return "", fmt.Errorf("container %q in pod %q is waiting to start: trying and failing to pull image", container, podName)
		}
		return "", fmt.Errorf("container %q in pod %q is waiting to start: %v", container, podName, waiting.Reason)
	default:
		return "", fmt.Errorf("container %q in pod %q is waiting to start - no logs yet", container, podName)
	}
	// "staticpodd://<id>", as the status writes it.
	if _, after, ok := strings.Cut(id, "://"); ok {
		id = after
	}
	return id, nil
}

// LogEnded reports whether the container whose log file is path, as LogFile
// returned it, will write no more logs: that generation of its pod is gone,
// or the container has exited and will not run again, its pod being removed
// or its restart policy saying so (as plan applies it). A followed log ends
// then.
func (a *Agent) LogEnded(namespace, name, container, path string) bool {
	return a.published().logEnded(namespace, name, container, path)
}

func (v podSet) logEnded(namespace, name, container, path string) bool {
	pod := v.find(namespace, name)
	if pod == nil || filepath.Join(v.logDir(pod), container) != filepath.Dir(path) {
		return true
	}
	removing := pod.DeletionTimestamp != nil
	c := findContainer(pod, container)
	if c == nil {
		return false // no status either
	}
	for _, cs := range pod.Status.InitContainerStatuses {
		if t := cs.State.Terminated; cs.Name == container && t != nil {
			return removing || t.ExitCode == 0 || !shouldRestart(c, pod.Spec.RestartPolicy, int(t.ExitCode))
		}
	}
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; cs.Name == container && t != nil {
			return removing || !shouldRestart(c, pod.Spec.RestartPolicy, int(t.ExitCode))
		}
	}
	return false
}

// podSet is what the CLI's questions about pods (LogFile, LogEnded,
// ExecTarget) are answered from: the daemon's published pods, or a stopped
// daemon's records (Records).
type podSet struct {
	pods   []v1.Pod
	logDir func(*v1.Pod) string // where the pod's containers' log directories are
	// containers are the runtime's (or the records') containers.
	containers func(context.Context) ([]podspec.ContainerStatus, error)
}

func (a *Agent) published() podSet {
	return podSet{pods: a.Pods(), logDir: a.cfg.Paths.LogDir, containers: a.rt.List}
}

// find is the pod namespace/name: during an edit, the new generation, not
// the old one listed Terminating beside it (as describe.Find picks).
func (v podSet) find(namespace, name string) *v1.Pod {
	var found *v1.Pod
	for i := range v.pods {
		p := &v.pods[i]
		if p.Namespace != namespace || p.Name != name {
			continue
		}
		if p.DeletionTimestamp == nil {
			return p
		}
		if found == nil {
			found = p
		}
	}
	return found
}
