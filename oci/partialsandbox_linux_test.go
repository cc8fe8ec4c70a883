//go:build linux && cgo

package oci

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/staticpodd/staticpodd/agent/podspec"
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

// The pod's cgroup is made beside the sandbox's namespaces, files and
// /dev/shm: when either fails, the sandbox fails whole and nothing of it
// is left, neither the cgroup made beside a namespace that failed (a
// hostname the kernel refuses) nor the mounts made beside a cgroup that
// failed (a CPU quota under the kernel's minimum of 1 ms).
func TestFailedSandboxLeavesNothing(t *testing.T) {
	e := newEnv(t)
	badHost := e.pod(false)
	badHost.Hostname = strings.Repeat("h", 65) // over the kernel's 64
	badQuota := e.pod(false)
	badQuota.Resources.CPUQuota, badQuota.Resources.CPUPeriod = 1, 100000
	for _, p := range []*podspec.Pod{badHost, badQuota} {
		err := e.rt.CreateSandbox(t.Context(), p)
		t.Logf("pod with hostname %q, CPU quota %d: %v", p.Hostname, p.Resources.CPUQuota, err)
		if err == nil {
			t.Errorf("pod with hostname %q, CPU quota %d: sandbox made", p.Hostname, p.Resources.CPUQuota)
			continue
		}
		if _, err := os.Stat(e.rt.podDir(p.UID)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the failed sandbox's dir is still there: %v", err)
		}
		mi, err := os.ReadFile("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(line); len(f) > 4 && strings.Contains(f[4], p.UID) {
				t.Errorf("the failed sandbox's mount %s is left", f[4])
			}
		}
		for _, dir := range cgroupDirs(t, filepath.Join(e.cfg.CgroupRoot, "pod"+p.UID)) {
			if _, err := os.Stat(dir); err == nil {
				t.Errorf("the failed sandbox's cgroup %s is left", dir)
			}
		}
	}
}
