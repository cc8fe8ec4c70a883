package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// onChange is the state of the pods' staticpodd.io/restart-on-change files
// that signal instead of restarting: by pod full name, each file's digest
// when its pod was last handed out. Only reconcile's goroutine uses it.
type onChange struct {
	signalled map[string]map[string]string
	wg        sync.WaitGroup
}

// applyWatchedFiles makes each pod with restart-on-change files the
// generation of their contents (manifest.Regenerate with their digests) and
// signals the pods whose signal files changed since the last reconcile. A
// daemon that restarts reads the same contents again, hence the same UIDs:
// only a change while it was down restarts a pod. A file's change while it
// was down does not signal: the first digest a daemon reads is where it
// starts from.
func (a *Agent) applyWatchedFiles(ctx context.Context, pods map[string]manifest.Pod) {
	keep := map[string]bool{}
	signalled := map[string]map[string]string{}
	for key, p := range pods {
		files, err := manifest.RestartOnChange(p.Pod)
		if err != nil || len(files) == 0 {
			continue // validation refused the manifest already
		}
		paths := make([]string, len(files))
		for i, f := range files {
			paths[i] = f.Path
			keep[f.Path] = true
		}
		digests := a.files.Digests(paths)
		var salt strings.Builder
		var send []manifest.WatchedFile
		for i, f := range files {
			if f.Signal == "" {
				fmt.Fprintf(&salt, "file:%s:%s\n", f.Path, digests[i])
				continue
			}
			if signalled[key] == nil {
				signalled[key] = map[string]string{}
			}
			signalled[key][f.Path] = digests[i]
			if old, ok := a.onChange.signalled[key][f.Path]; ok && old != digests[i] {
				send = append(send, f)
			}
		}
		p = manifest.Regenerate(p, salt.String(), nil)
		pods[key] = p
		if len(send) > 0 {
			a.onChange.wg.Go(func() { a.signalPod(ctx, p, send) })
		}
	}
	a.onChange.signalled = signalled
	a.files.Keep(keep)
}

// signalPod sends each file's signal to the main process of every running
// container of pod's generation.
func (a *Agent) signalPod(ctx context.Context, p manifest.Pod, files []manifest.WatchedFile) {
	pod := a.published().find(p.Namespace, p.Name)
	if pod == nil || pod.UID != p.UID || pod.DeletionTimestamp != nil {
		return // not started yet, or stopping: it reads the file when it starts
	}
	for _, f := range files {
		sig, err := podspec.ParseSignal(f.Signal)
		if err != nil {
			continue // validated: never
		}
		for _, cs := range append(pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses...) {
			if cs.State.Running == nil || cs.ContainerID == "" {
				continue
			}
			id := strings.TrimPrefix(cs.ContainerID, containerIDPrefix)
			if err := a.rt.Signal(ctx, id, sig); err != nil {
				a.logger.Warn("signal a container on a change of its restart-on-change file", "pod", p.Namespace+"/"+p.Name,
					"container", cs.Name, "file", f.Path, "signal", f.Signal, "err", err)
				continue
			}
			a.logger.Info("signalled a container on a change of its restart-on-change file", "pod", p.Namespace+"/"+p.Name,
				"container", cs.Name, "file", f.Path, "signal", f.Signal)
		}
	}
}
