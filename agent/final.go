package agent

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"

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
