//go:build linux && cgo

package oci

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A sandbox whose pod.json is missing (its creation or removal was cut short
// by the daemon's death) is not listed, so nothing else would remove it: the
// next runtime removes it at start, its namespace and /dev/shm mounts and its
// cgroup with it. A complete sandbox beside it stays.
func TestPartialSandboxRemovedAtStart(t *testing.T) {
	e := newEnv(t)
	partial, whole := e.pod(false), e.pod(false)
	e.sandbox(partial)
	e.sandbox(whole)
	if err := os.Remove(filepath.Join(e.rt.podDir(partial.UID), podFile)); err != nil {
		t.Fatal(err)
	}
	e.rt = e.newRuntime()
	if _, err := os.Stat(e.rt.podDir(partial.UID)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the partial sandbox's dir is still there: %v", err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.Contains(f[4], partial.UID) {
			t.Errorf("the partial sandbox's mount %s is left", f[4])
		}
	}
	for _, dir := range cgroupDirs(t, filepath.Join(e.cfg.CgroupRoot, "pod"+partial.UID)) {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("the partial sandbox's cgroup %s is left", dir)
		}
	}
	uids, err := e.rt.ListSandboxes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(uids) != 1 || uids[0] != whole.UID {
		t.Errorf("sandboxes after the start: %v, want only the complete one %s", uids, whole.UID)
	}
	if err := e.rt.RemoveSandbox(t.Context(), whole.UID); err != nil {
		t.Fatal(err)
	}
}
