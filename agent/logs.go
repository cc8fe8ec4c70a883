package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
)

// ErrNoLogs: the container has no log file (yet, or no previous one).
var ErrNoLogs = errors.New("no logs")

// LogFile returns the CRI log file of container in the pod namespace/name (its
// full name): the newest run's, or with previous the run before it, as
// kubectl logs --previous. Files are <LogDir>/<container>/<attempt>.log.
func (a *Agent) LogFile(namespace, name, container string, previous bool) (string, error) {
	var pod *v1.Pod
	for _, p := range a.Pods() {
		if p.Namespace == namespace && p.Name == name {
			pod = &p
			break
		}
	}
	if pod == nil {
		return "", fmt.Errorf("pod %s/%s: %w", namespace, name, ErrNoLogs)
	}
	if findContainer(pod, container) == nil {
		return "", fmt.Errorf("pod %s/%s has no container %q: %w", namespace, name, container, ErrNoLogs)
	}
	dir := filepath.Join(a.cfg.Paths.LogDir(pod), container)
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("logs of container %s of pod %s/%s: %w", container, namespace, name, err)
	}
	var attempts []int
	for _, e := range entries {
		if n, err := strconv.Atoi(strings.TrimSuffix(e.Name(), ".log")); err == nil && strings.HasSuffix(e.Name(), ".log") {
			attempts = append(attempts, n)
		}
	}
	slices.Sort(attempts)
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
	return filepath.Join(dir, strconv.Itoa(attempts[i])+".log"), nil
}
