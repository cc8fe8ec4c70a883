package agent

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
)

// A pod's conditions keep their transition times across daemon restarts, as
// the kubelet's do: its status manager, with no status of a static pod
// cached yet, takes the mirror pod's as the status before, so a condition
// whose status did not change keeps its lastTransitionTime. Here they are
// kept in the pod's directory (conditions.json), written when one moves,
// and read as the status before of the first status of a pod found
// running at start. They are written as the probe marks are, without
// fsync (atomicfile.Replace).

// maxConditionsFile bounds what loadConditions reads of conditions.json.
const maxConditionsFile = 64 << 10

// maxKeptConditions bounds how many conditions are taken from it.
const maxKeptConditions = 16

// keepConditions writes the conditions of pod's status published now
// (conds) to the pod's conditions.json when one of them moved since they
// were last written. Only a pod whose sandbox is made has a directory to
// keep them in.
func (w *worker) keepConditions(pod *v1.Pod, st *podState, conds []v1.PodCondition) {
	root, uid := w.a.cfg.Paths.RootDir, string(pod.UID)
	if root == "" || !st.sandbox || w.gen == nil || w.gen.uid != uid || !manifest.ValidUID(uid) {
		return
	}
	if w.kept.uid == uid && slices.EqualFunc(w.kept.conds, conds, sameTransition) {
		return
	}
	b, err := json.Marshal(conds)
	if err == nil {
		path := poddir.Root(root).Conditions(uid)
		if err = os.MkdirAll(filepath.Dir(path), 0o700); err == nil {
			err = atomicfile.Replace(path, b)
		}
	}
	if err != nil {
		w.logger.Warn("cannot keep the pod's conditions for the next daemon", "err", err)
		return
	}
	// conds are the published status's, which never change: kept as they are.
	w.kept.uid, w.kept.conds = uid, conds
}

// sameTransition reports whether a and b are the same condition with the
// same status since the same time, as kept (to the second).
func sameTransition(a, b v1.PodCondition) bool {
	return a.Type == b.Type && a.Status == b.Status && a.LastTransitionTime.Unix() == b.LastTransitionTime.Unix()
}

// loadConditions returns the conditions keepConditions kept of pod uid;
// nil if none.
func (w *worker) loadConditions(uid string) []v1.PodCondition {
	conds, err := keptConditions(w.a.cfg.Paths.RootDir, uid)
	if err != nil {
		w.logger.Warn("cannot read the pod's conditions kept by the daemon before", "uid", uid, "err", err)
	}
	return conds
}

// keptConditions reads the conditions kept of pod uid under rootDir; nil,
// and no error, if none are.
func keptConditions(rootDir, uid string) ([]v1.PodCondition, error) {
	if rootDir == "" || !manifest.ValidUID(uid) {
		return nil, nil
	}
	b, err := atomicfile.Read(poddir.Root(rootDir).Conditions(uid), maxConditionsFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var conds []v1.PodCondition
	if err == nil {
		err = json.Unmarshal(b, &conds)
	}
	if err != nil {
		return nil, err
	}
	conds = slices.DeleteFunc(conds, func(c v1.PodCondition) bool {
		return c.Type == "" || c.Status == "" || c.LastTransitionTime.IsZero()
	})
	if len(conds) > maxKeptConditions {
		conds = conds[:maxKeptConditions]
	}
	return conds, nil
}
