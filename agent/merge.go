package agent

import (
	"fmt"
	"slices"
	"strings"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/source"
)

// fullName is the key of a pod: namespace/name.
func fullName(p manifest.Pod) string {
	return p.Namespace + "/" + p.Name
}

// merge combines the latest update of each source into one pod per full name, with
// every source's problems. Two pods with the same full name are a problem naming
// both origins: the one whose UID is running is kept, else the first by origin,
// and the other is not run.
func merge(updates map[string]source.Update, running map[string]bool) (map[string]manifest.Pod, []manifest.Problem) {
	names := make([]string, 0, len(updates))
	for n := range updates {
		names = append(names, n)
	}
	slices.Sort(names)

	byName := map[string][]manifest.Pod{}
	var problems []manifest.Problem
	for _, n := range names {
		u := updates[n]
		problems = append(problems, u.Problems...)
		for _, p := range u.Pods {
			if p.Pod == nil {
				continue
			}
			byName[fullName(p)] = append(byName[fullName(p)], p)
		}
	}

	pods := make(map[string]manifest.Pod, len(byName))
	for name, cands := range byName {
		slices.SortStableFunc(cands, func(a, b manifest.Pod) int {
			ra, rb := running[string(a.UID)], running[string(b.UID)]
			switch {
			case ra && !rb:
				return -1
			case rb && !ra:
				return 1
			}
			return strings.Compare(a.Origin, b.Origin)
		})
		kept := cands[0]
		pods[name] = kept
		for _, other := range cands[1:] {
			problems = append(problems, manifest.Problem{
				Origin: other.Origin,
				Err:    fmt.Errorf("pod %s is defined both in %s and in %s; running the one from %s", name, kept.Origin, other.Origin, kept.Origin),
			})
		}
	}
	slices.SortStableFunc(problems, func(a, b manifest.Problem) int { return strings.Compare(a.Origin, b.Origin) })
	return pods, problems
}

// waitForHeldUIDsLocked keeps out of pods, for now, each pod whose UID a
// worker of another name holds (its containers, its sandbox or its
// directory not yet torn down): a manifest renamed with its explicit
// metadata.uid kept, or another pod given an old one's UID. Two workers
// would drive one UID (one sandbox, one pods/<uid> directory): the old one's
// teardown would take what the new one made. The pod starts once that
// worker let the UID go (releaseUID runs the reconcile again), as an edit's
// new generation starts once the old one has stopped. A worker that only
// wanted the UID, with nothing of it made, holds nothing: it takes the UID
// before its sandbox only if it still wants it (worker.holdUID).
//
// Before the first full reconcile, a pod found running (l.stash) is claimed
// by the worker made for the pod of its UID; a worker that exists already
// for another UID does not claim it, and the pod waits as well: the full
// reconcile gives it to a worker of its recorded name, or an orphan one,
// which stops it.
func (a *Agent) waitForHeldUIDsLocked(pods map[string]manifest.Pod, stash map[string]*podState) []manifest.Problem {
	a.uidWaits = false
	var problems []manifest.Problem
	for key, p := range pods {
		if w := a.workers[key]; w != nil && w.desiredUID() != string(p.UID) && stash[string(p.UID)] != nil {
			problems = append(problems, manifest.Problem{
				Origin: p.Origin,
				Err: fmt.Errorf("pod %s has metadata.uid %s, as a pod found running, which is stopped first; it starts once that one has stopped",
					key, p.UID),
			})
			delete(pods, key)
			a.uidWaits = true
			continue
		}
		for other := range a.held[string(p.UID)] {
			if other == key {
				continue
			}
			problems = append(problems, manifest.Problem{
				Origin: p.Origin,
				Err: fmt.Errorf("pod %s has metadata.uid %s, as pod %s, which is stopping; it starts once that one has stopped",
					key, p.UID, other),
			})
			delete(pods, key)
			a.uidWaits = true
			break
		}
	}
	slices.SortStableFunc(problems, func(a, b manifest.Problem) int { return strings.Compare(a.Origin, b.Origin) })
	return problems
}

// holdUIDLocked records that worker key holds pod uid: it has a state for
// it (worker.pods), until its teardown (releaseUID).
func (a *Agent) holdUIDLocked(uid, key string) {
	if a.held == nil {
		a.held = map[string]map[string]bool{}
	}
	if a.held[uid] == nil {
		a.held[uid] = map[string]bool{}
	}
	a.held[uid][key] = true
}

// releaseUID records that worker key let pod uid go (its teardown is done),
// and reconciles again when a pod waits for a UID.
func (a *Agent) releaseUID(uid, key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.held[uid], key)
	if len(a.held[uid]) == 0 {
		delete(a.held, uid)
	}
	if a.uidWaits {
		select {
		case a.rerun <- struct{}{}:
		default:
		}
	}
}

// dropSharedUIDs keeps one of the pods of different names that have one
// UID (a manifest may set its own metadata.uid) and returns a problem for
// each other, which it removes from pods: a UID names the pod's sandbox,
// network attachment and cgroup, which two pods cannot share. Kept is the
// one whose worker has that UID already (workers: full name to desired
// UID), so a new manifest cannot take a running pod's UID from it; else
// the first by origin and name. The kubelet keys a source's pods by UID,
// and so keeps only one too, without saying so.
func dropSharedUIDs(pods map[string]manifest.Pod, workers map[string]string) []manifest.Problem {
	byUID := map[string][]string{}
	for name, p := range pods {
		byUID[string(p.UID)] = append(byUID[string(p.UID)], name)
	}
	var problems []manifest.Problem
	for uid, names := range byUID {
		if len(names) < 2 {
			continue
		}
		slices.SortFunc(names, func(a, b string) int {
			ra, rb := workers[a] == uid, workers[b] == uid
			switch {
			case ra && !rb:
				return -1
			case rb && !ra:
				return 1
			}
			if c := strings.Compare(pods[a].Origin, pods[b].Origin); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		kept := pods[names[0]]
		for _, other := range names[1:] {
			problems = append(problems, manifest.Problem{
				Origin: pods[other].Origin,
				Err: fmt.Errorf("pod %s has metadata.uid %s, as pod %s in %s has; running only %s",
					other, uid, names[0], kept.Origin, names[0]),
			})
			delete(pods, other)
		}
	}
	slices.SortStableFunc(problems, func(a, b manifest.Problem) int { return strings.Compare(a.Origin, b.Origin) })
	return problems
}
