package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// dirNames returns the names in dir, sorted; none if it does not exist.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	return names
}

// Many quick edits of one manifest, each a rename over the file as sed -i and
// configuration management do, run only the newest generation and leave
// nothing on the host of the generations that were replaced or never started;
// removing the manifest then leaves nothing at all.
func TestRapidEditsLeaveNothing(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.start()
	gen := func(n int) string {
		return sleeper("edit", fmt.Sprintf("    env:\n    - {name: GEN, value: %q}\n", strconv.Itoa(n)))
	}
	d.writeManifest("edit.yaml", gen(0))
	d.waitRunning("edit", 30*time.Second)
	const edits = 50
	for n := 1; n <= edits; n++ {
		d.writeManifest("edit.yaml", gen(n))
	}
	var pod *v1.Pod
	d.eventually(60*time.Second, "the last generation running", func() error {
		pod = d.pod("edit")
		if pod == nil || len(pod.Spec.Containers) != 1 || len(pod.Spec.Containers[0].Env) != 1 {
			return fmt.Errorf("pod %+v", pod)
		}
		if gen := pod.Spec.Containers[0].Env[0].Value; gen != strconv.Itoa(edits) {
			return fmt.Errorf("generation %s", gen)
		}
		if cs := pod.Status.ContainerStatuses; len(cs) != 1 || cs[0].State.Running == nil {
			return fmt.Errorf("not running: %+v", pod.Status.ContainerStatuses)
		}
		return nil
	})
	// While it runs, it alone has a pod directory, a log directory and a sandbox.
	for dir, want := range map[string]string{
		filepath.Join(d.rootDir, "pods"): string(pod.UID),
		filepath.Join(d.runDir, "pods"):  string(pod.UID),
		d.logsDir:                        fmt.Sprintf("default_%s_%s", pod.Name, pod.UID),
	} {
		if got := dirNames(t, dir); !slices.Equal(got, []string{want}) {
			t.Errorf("%s holds %v after %d edits, want only [%s]", dir, got, edits, want)
		}
	}
	d.removeManifest("edit.yaml")
	d.eventually(30*time.Second, "the pod is gone", func() error {
		if d.pod("edit") != nil {
			return errStill
		}
		return nil
	})
	d.assertNoLeaks()
}
