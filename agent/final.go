package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// maxFinalFile bounds what loadFinal reads of a pod's final.json: a few
// hundred bytes per container.
const maxFinalFile = 1 << 20

// storeFinal writes, before node-level reclaim removes the exited
// containers of a pod that will not run them again, their last statuses
// (generation.final) to the pod's final.json, durably. Without it a daemon
// killed after the removal finds no container of the pod and takes it for
// one never started: a restartPolicy Never pod that completed would run
// again in the same UID, which the kubelet's rule forbids. It reports
// whether reclaim may go on: nothing to keep, or kept.
func (w *worker) storeFinal() bool {
	root := w.a.cfg.Paths.RootDir
	if root == "" || len(w.gen.final) == 0 || !manifest.ValidUID(w.gen.uid) {
		return true
	}
	b, err := json.Marshal(w.gen.final)
	if err == nil {
		err = writeRecord(poddir.Root(root).Final(w.gen.uid), b)
	}
	if err != nil {
		w.logger.Warn("cannot record the final statuses of the pod's exited containers; they are kept", "err", err)
		return false
	}
	return true
}

// loadFinal returns the final statuses storeFinal recorded for pod uid; nil
// if none.
func (w *worker) loadFinal(uid string) map[string]podspec.ContainerStatus {
	root := w.a.cfg.Paths.RootDir
	if root == "" || !manifest.ValidUID(uid) {
		return nil
	}
	b, err := atomicfile.Read(poddir.Root(root).Final(uid), maxFinalFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var final map[string]podspec.ContainerStatus
	if err == nil {
		err = json.Unmarshal(b, &final)
	}
	if err != nil {
		w.logger.Warn("cannot read the final statuses of the pod's reclaimed containers", "uid", uid, "err", err)
		return nil
	}
	for name, c := range final {
		// Only what storeFinal writes: an exited instance of this pod.
		if c.State != podspec.StateExited || c.PodUID != uid || c.Name != name {
			delete(final, name)
		}
	}
	return final
}

// forgetFinal removes the final statuses recorded for pod uid, which starts
// again as a new generation (its eviction lifted, its manifest recreated).
func (w *worker) forgetFinal(uid string) {
	root := w.a.cfg.Paths.RootDir
	if root == "" || !manifest.ValidUID(uid) {
		return
	}
	if err := os.Remove(poddir.Root(root).Final(uid)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		w.logger.Warn("cannot remove the final statuses of the pod's reclaimed containers", "uid", uid, "err", err)
	}
}

// maxLastFile bounds what loadLast reads of a pod's last.json: a few hundred
// bytes per container.
const maxLastFile = 1 << 20

// storeLast writes the instance each container of the generation replaced
// last (ctrInfo.last) to the pod's last.json, before it is removed: the
// daemon after this one shows it as the container's lastState, as the
// kubelet, which keeps the dead container, does across its restarts.
func (w *worker) storeLast() {
	root := w.a.cfg.Paths.RootDir
	if root == "" || w.gen == nil || !manifest.ValidUID(w.gen.uid) {
		return
	}
	last := map[string]podspec.ContainerStatus{}
	for name, ci := range w.gen.ctrs {
		if ci != nil && ci.last != nil && ci.last.ID != "" {
			last[name] = *ci.last
		}
	}
	b, err := json.Marshal(last)
	if err == nil {
		err = writeRecord(poddir.Root(root).Last(w.gen.uid), b)
	}
	if err != nil {
		w.logger.Warn("cannot record the replaced instance of a container for the next daemon", "err", err)
	}
}

// loadLast sets, for pod uid found running at start (st), the instance
// each container replaced last as storeLast recorded it (keptLast).
func (w *worker) loadLast(uid string, st *podState) {
	last, err := keptLast(w.a.cfg.Paths.RootDir, uid, st.containers)
	if err != nil {
		w.logger.Warn("cannot read the replaced instances of the pod's containers", "uid", uid, "err", err)
	}
	for name, c := range last {
		w.info(name).last = &c
	}
}

// keptLast reads, under rootDir, the instance each container of pod uid
// replaced last as storeLast recorded it, by container name: only the
// instance right before the latest one the runtime has (cs), and only
// where the runtime has neither that instance (its destroy failed: the
// runtime's own is shown) nor an earlier exited one, which is the last
// then. Nil, and no error, if none is recorded; an entry the daemon cannot
// have written (another container's, or an instance the runtime has
// under another name) is left out and counted in the error, with the
// others returned.
func keptLast(rootDir, uid string, cs []podspec.ContainerStatus) (map[string]podspec.ContainerStatus, error) {
	if rootDir == "" || !manifest.ValidUID(uid) {
		return nil, nil
	}
	b, err := atomicfile.Read(poddir.Root(rootDir).Last(uid), maxLastFile)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var last map[string]podspec.ContainerStatus
	if err == nil {
		err = json.Unmarshal(b, &last)
	}
	if err != nil {
		return nil, err
	}
	latest := latestByName(cs)
	var refused []string
	for name, c := range last {
		cur, ok := latest[name]
		switch {
		case c.State != podspec.StateExited || c.PodUID != uid || c.Name != name || c.ID == "" ||
			slices.ContainsFunc(cs, func(k podspec.ContainerStatus) bool { return k.ID == c.ID && k.Name != name }):
			refused = append(refused, name)
			delete(last, name)
		case !ok || c.Attempt+1 != cur.Attempt || slices.ContainsFunc(cs, func(k podspec.ContainerStatus) bool {
			return k.ID == c.ID || k.Name == name && k.ID != cur.ID && k.State == podspec.StateExited
		}):
			delete(last, name) // not the instance right before the latest one
		}
	}
	if len(refused) > 0 {
		// Named by the first in order, so that a file of many says so in
		// one short line.
		slices.Sort(refused)
		err = fmt.Errorf("%s: %d entries are not instances of their containers that a restart replaced, container %s the first",
			poddir.Root(rootDir).Last(uid), len(refused), podspec.Quote(refused[0]))
	}
	return last, err
}
