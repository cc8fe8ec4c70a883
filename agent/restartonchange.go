package agent

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// onChange is the state of the pods' staticpodd.io/restart-on-change files
// that signal instead of restarting: by pod full name, each file's digest
// when its pod was last handed out. Only reconcile's goroutine uses it.
type onChange struct {
	signalled map[string]map[string]string
	// applied is, by pod full name, the digests mixed into its UID last
	// and since when, and how long the next change waits.
	applied map[string]appliedFiles
	wake    *time.Timer // a reconcile when a held change may apply
	wg      sync.WaitGroup
	// digestKey keys the digests of objects' data (objectDigest); read
	// or made at its first use.
	digestKey []byte
}

// appliedFiles is a pod's restart-on-change salt in force.
type appliedFiles struct {
	salt    string
	at      time.Time
	backoff time.Duration
}

// A pod's restart-on-change files make a new generation at most once per
// back-off, which doubles from filesBackoff to filesBackoffMax while the
// files keep changing and starts again after filesQuiet without a change:
// the crash-loop back-off's figures. Without it a container that writes a
// file it is restarted on (a hostPath) would restart as fast as it starts.
const (
	filesBackoff    = 10 * time.Second
	filesBackoffMax = 5 * time.Minute
	filesQuiet      = 10 * time.Minute
)

// hold returns the salt a pod runs with now, given the files' salt now,
// and when a held change may apply (zero if none is held).
func (o *onChange) hold(key, salt string, now time.Time, applied map[string]appliedFiles) (string, time.Time) {
	prev, ok := o.applied[key]
	switch {
	case !ok:
		// The first look (a daemon's start, a new pod): what runs is
		// these contents' generation already.
		applied[key] = appliedFiles{salt: salt, at: now}
		return salt, time.Time{}
	case prev.salt == salt:
		applied[key] = prev
		return salt, time.Time{}
	}
	if wait := prev.at.Add(prev.backoff); now.Before(wait) {
		applied[key] = prev
		return prev.salt, wait
	}
	next := min(max(2*prev.backoff, filesBackoff), filesBackoffMax)
	if now.Sub(prev.at) > filesQuiet {
		next = filesBackoff
	}
	applied[key] = appliedFiles{salt: salt, at: now, backoff: next}
	return salt, time.Time{}
}

// applyWatchedFiles makes each pod with restart-on-change files the
// generation of their contents and of the data of the ConfigMaps and Secrets
// it names (manifest.Regenerate with their digests) and
// signals the pods whose signal files changed since the last reconcile. A
// daemon that restarts reads the same contents again, hence the same UIDs:
// only a change while it was down restarts a pod. A file's change while it
// was down does not signal: the first digest a daemon reads is where it
// starts from. running holds the UIDs of the pods that run (or are found
// running, not yet adopted).
func (a *Agent) applyWatchedFiles(ctx context.Context, pods map[string]manifest.Pod, running map[string]bool) {
	keep := map[string]bool{}
	signalled := map[string]map[string]string{}
	applied := map[string]appliedFiles{}
	now := time.Now()
	var wake time.Time
	for key, p := range pods {
		files, err := manifest.RestartOnChange(p.Pod)
		if err != nil || len(files) == 0 {
			continue // validation refused the manifest already
		}
		var paths []string
		for _, f := range files {
			if f.Kind == "" {
				paths = append(paths, f.Path)
				keep[f.Path] = true
			}
		}
		digests := a.files.Digests(paths)
		var salt strings.Builder
		var send []manifest.WatchedFile
		i := -1
		absent := false
		for _, f := range files {
			if f.Kind != "" {
				d := a.objectDigest(objects.Key(f.Kind, p.Namespace, f.Path))
				absent = absent || d == absentDigest
				fmt.Fprintf(&salt, "%s:%s:%s\n", f.Kind, f.Path, d)
				continue
			}
			i++
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
		var runs string
		if _, looked := a.onChange.applied[key]; !looked && absent {
			runs = a.runningGeneration(p, running)
		}
		if runs != "" {
			// The first look, an object the pod names is not there, and a
			// generation of this manifest runs: it was made with that
			// object (the kept copy a restarted daemon runs with the
			// manifest unusable has no Secret with values of its own), so
			// it stays, as it stays with a manifest unchanged. Nothing is
			// applied: the next look is a first one again, and the object
			// back with the same data gives this UID again.
			p = manifest.Regenerate(p, salt.String(), nil) // a copy: the salt names the object
			p.Pod.UID = types.UID(runs)
			p.Pod.Annotations[manifest.AnnotationHash] = runs
		} else {
			s, held := a.onChange.hold(key, salt.String(), now, applied)
			if !held.IsZero() {
				a.logger.Info("restart-on-change file changed: the pod restarts once its back-off has passed", "pod", key, "at", held)
				if wake.IsZero() || held.Before(wake) {
					wake = held
				}
			}
			p = manifest.Regenerate(p, s, nil)
		}
		pods[key] = p
		if len(send) > 0 {
			a.onChange.wg.Go(func() { a.signalPod(ctx, p, send) })
		}
	}
	a.onChange.signalled = signalled
	a.onChange.applied = applied
	a.files.Keep(keep)
	switch {
	case wake.IsZero():
	case a.onChange.wake == nil:
		a.onChange.wake = time.AfterFunc(time.Until(wake), func() {
			select {
			case a.regenerate <- struct{}{}:
			default: // one pending reconcile stands for any number
			}
		})
	default:
		a.onChange.wake.Reset(time.Until(wake))
	}
}

// runningGeneration is the UID of the one pod of running that was made from
// p's manifest (its kept manifest.json gives p's manifest UID), "" if none
// or several.
func (a *Agent) runningGeneration(p manifest.Pod, running map[string]bool) string {
	if a.cfg.Seen == nil {
		return ""
	}
	want, found := manifest.ManifestUID(p.Pod), ""
	for uid := range running {
		if a.cfg.Seen.ManifestUID(uid) != want {
			continue
		}
		if found != "" {
			return ""
		}
		found = uid
	}
	return found
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
