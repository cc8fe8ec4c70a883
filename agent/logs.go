package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/podspec/logfiles"
)

// ErrNoLogs: the container has no log file (yet, or no previous one).
var ErrNoLogs = errors.New("no logs")

// LogFile returns the CRI log file of container in the pod namespace/name (its
// full name): the newest run's, or with previous the run before it, as
// kubectl logs --previous. Files are <LogDir>/<container>/<attempt>.log, and
// rotation makes <attempt>.log.<time>[.gz] of them (logfiles.RotatedLogs): a
// run with only those still has its <attempt>.log returned.
func (a *Agent) LogFile(namespace, name, container string, previous bool) (string, error) {
	pod := a.findPod(namespace, name)
	if pod == nil {
		return "", fmt.Errorf("pod %s/%s: %w", namespace, name, ErrNoLogs)
	}
	if findContainer(pod, container) == nil {
		return "", fmt.Errorf("pod %s/%s has no container %q: %w", namespace, name, container, ErrNoLogs)
	}
	dir := filepath.Join(a.cfg.Paths.LogDir(pod), container)
	// Beneath podLogsDir through no symlink: a container that mounts it
	// may have swapped its directory for one to a host directory.
	attempts, err := logfiles.Runs(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("logs of container %s of pod %s/%s: %w", container, namespace, name, err)
	}
	i := len(attempts) - 1
	if previous {
		i--
	}
	if i < 0 {
		what := "logs"
		if previous {
			what = "previous logs"
		}
		return "", fmt.Errorf("container %s of pod %s/%s has no %s: %w", container, namespace, name, what, ErrNoLogs)
	}
	return filepath.Join(dir, logfiles.LogFileName(attempts[i])), nil
}

// LogEnded reports whether the container whose log file is path, as LogFile
// returned it, will write no more logs: that generation of its pod is gone,
// or the container has exited and will not run again, its pod being removed
// or its restart policy saying so (as plan applies it). A followed log ends
// then.
func (a *Agent) LogEnded(namespace, name, container, path string) bool {
	pod := a.findPod(namespace, name)
	if pod == nil || filepath.Join(a.cfg.Paths.LogDir(pod), container) != filepath.Dir(path) {
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

func (a *Agent) findPod(namespace, name string) *v1.Pod {
	for _, p := range a.Pods() {
		if p.Namespace == namespace && p.Name == name {
			return &p
		}
	}
	return nil
}
