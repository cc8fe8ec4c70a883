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
	return a.published().logFile(namespace, name, container, previous)
}

func (v podSet) logFile(namespace, name, container string, previous bool) (string, error) {
	pod := v.find(namespace, name)
	if pod == nil {
		return "", fmt.Errorf("pod %s/%s: %w", namespace, name, ErrNoLogs)
	}
	if findContainer(pod, container) == nil {
		return "", fmt.Errorf("pod %s/%s has no container %q: %w", namespace, name, container, ErrNoLogs)
	}
	podDir := v.logDir(pod)
	if podDir == "" {
		return "", fmt.Errorf("pod %s/%s has no log directory recorded: %w", namespace, name, ErrNoLogs)
	}
	dir := filepath.Join(podDir, container)
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
}

func (a *Agent) published() podSet { return podSet{pods: a.Pods(), logDir: a.cfg.Paths.LogDir} }

func (v podSet) find(namespace, name string) *v1.Pod {
	for _, p := range v.pods {
		if p.Namespace == namespace && p.Name == name {
			return &p
		}
	}
	return nil
}
