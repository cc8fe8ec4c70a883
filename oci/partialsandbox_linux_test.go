//go:build linux && cgo

package oci

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// A sandbox whose pod.json is missing (its creation or removal was cut short
// by the daemon's death) is not listed, so nothing else would remove it: the
// next runtime removes it at start, its namespace and /dev/shm mounts and its
// cgroup with it, even when it was started with another cgroupRoot. A
// complete sandbox beside it stays.
func TestPartialSandboxRemovedAtStart(t *testing.T) {
	e := newEnv(t)
	partial, whole := e.pod(false), e.pod(false)
	e.sandbox(partial)
	e.sandbox(whole)
	if err := os.Remove(filepath.Join(e.rt.podDir(partial.UID), podFile)); err != nil {
		t.Fatal(err)
	}
	oldRoot := e.restartWithAnotherCgroupRoot()
	e.sandboxGone(partial.UID, "partial")
	e.cgroupGone(oldRoot, partial.UID, "partial")
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
// /dev/shm (a pod without a network attachment): when either fails, the sandbox fails whole and nothing of it
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
		e.sandboxGone(p.UID, "failed")
	}
}

// sandboxGone fails the test if anything of pod uid's sandbox is left: its
// dir, a mount (namespaces, /dev/shm), its cgroup. what names the sandbox
// in the errors.
func (e *env) sandboxGone(uid, what string) {
	e.t.Helper()
	if _, err := os.Stat(e.rt.podDir(uid)); !errors.Is(err, fs.ErrNotExist) {
		e.t.Errorf("the %s sandbox's dir is still there: %v", what, err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		e.t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.Contains(f[4], uid) {
			e.t.Errorf("the %s sandbox's mount %s is left", what, f[4])
		}
	}
	e.cgroupGone(e.cfg.CgroupRoot, uid, what)
}

// A removal that cannot remove the pod's cgroup (here one of its directories
// is a mount point: rmdir says EBUSY) fails and keeps the sandbox's
// directory, without its record: a partial sandbox, not listed, which the
// next daemon removes whole once it can, even with another cgroupRoot, and
// even for a sandbox an older daemon made, whose cgroup's path only its
// record held. Create removes nothing where a sandbox has no directory, so
// none may be left without one.
func TestFailedRemovalLeavesAPartialSandbox(t *testing.T) {
	e := newEnv(t)
	p := e.pod(false)
	e.sandbox(p)
	if err := os.Remove(filepath.Join(e.rt.podDir(p.UID), "cgroup")); err != nil {
		t.Fatal(err) // as an older daemon made it
	}
	var pinned string
	for _, dir := range cgroupDirs(t, filepath.Join(e.cfg.CgroupRoot, "pod"+p.UID)) {
		if _, err := os.Stat(dir); err == nil {
			pinned = dir
			break
		}
	}
	if pinned == "" {
		t.Fatal("the pod's cgroup has no directory")
	}
	if err := unix.Mount("tmpfs", pinned, "tmpfs", 0, ""); err != nil {
		t.Fatal(err)
	}
	unpin := func() {
		if err := unix.Unmount(pinned, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			t.Error(err)
		}
	}
	defer unpin()
	if err := e.rt.RemoveSandbox(t.Context(), p.UID); err == nil {
		t.Fatal("removal with the cgroup pinned succeeded")
	} else {
		t.Logf("removal with %s pinned: %v", pinned, err)
	}
	if _, err := os.Stat(e.rt.podDir(p.UID)); err != nil {
		t.Errorf("the failed removal took the sandbox's directory: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.rt.podDir(p.UID), podFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the failed removal kept the sandbox's record: %v", err)
	}
	if uids, err := e.rt.ListSandboxes(t.Context()); err != nil || len(uids) != 0 {
		t.Errorf("sandboxes after the failed removal: %v, %v; want none listed", uids, err)
	}
	unpin()
	oldRoot := e.restartWithAnotherCgroupRoot()
	e.sandboxGone(p.UID, "partial")
	e.cgroupGone(oldRoot, p.UID, "partial")
}

// restartWithAnotherCgroupRoot starts the runtime again, as a daemon whose
// cgroupRoot was changed, and returns the old one.
func (e *env) restartWithAnotherCgroupRoot() string {
	e.t.Helper()
	old, root := e.cfg.CgroupRoot, e.cfg.CgroupRoot+"-new"
	e.t.Cleanup(func() { removeCgroupEverywhere(e.t, old) }) // newEnv's removes the new one
	e.cfg.CgroupRoot = root
	e.rt = e.newRuntime()
	return old
}

// cgroupGone fails the test if pod uid's cgroup under cgroupRoot root is left.
func (e *env) cgroupGone(root, uid, what string) {
	e.t.Helper()
	for _, dir := range cgroupDirs(e.t, filepath.Join(root, "pod"+uid)) {
		if _, err := os.Stat(dir); err == nil {
			e.t.Errorf("the %s sandbox's cgroup %s, under cgroupRoot %s, is left", what, dir, root)
		}
	}
}

// A pod cgroup left without its sandbox's directory (an older daemon's
// removal took the directory even when the cgroup stayed) is removed by the
// pod's next Create: the new sandbox does not take over what is in it.
func TestCreateRemovesACgroupLeftWithoutItsSandbox(t *testing.T) {
	e := newEnv(t)
	p := e.pod(false)
	var stale []string
	for _, dir := range cgroupDirs(t, filepath.Join(e.cfg.CgroupRoot, "pod"+p.UID, "stale")) {
		if strings.HasPrefix(dir, "/sys/fs/cgroup/unified/") {
			continue // a hybrid host's cgroup2, which the v1 driver does not use
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		stale = append(stale, dir)
	}
	if len(stale) == 0 {
		t.Fatal("no stale cgroup made")
	}
	e.sandbox(p)
	for _, dir := range stale {
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("the stale cgroup %s is in the new sandbox's", dir)
		}
	}
	if err := e.rt.RemoveSandbox(t.Context(), p.UID); err != nil {
		t.Fatal(err)
	}
	e.sandboxGone(p.UID, "removed")
}

// The cgroup a removal removes (killing every process in it) is one its pod
// could have: a cgroup file or record naming another (here a sibling of the
// pod's cgroup, with a process in it) is not taken, and the pod's own cgroup
// goes. And a sandbox of an older daemon, whose cgroup's path only its record
// holds, is removed even where that path cannot be written to the cgroup
// file (a full run dir; here a directory in the file's place), by a daemon
// with another cgroupRoot: its record then goes last.
func TestRemovalTakesOnlyItsPodsCgroup(t *testing.T) {
	e := newEnv(t)
	p := e.pod(false)
	e.sandbox(p)
	victim := filepath.Join(e.cfg.CgroupRoot, "victim")
	var dirs []string
	for _, dir := range cgroupDirs(t, victim) {
		if strings.HasPrefix(dir, "/sys/fs/cgroup/unified/") {
			continue
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, dir)
	}
	defer func() {
		for _, dir := range dirs {
			_ = os.Remove(dir)
		}
	}()
	if err := os.WriteFile(filepath.Join(e.rt.podDir(p.UID), "cgroup"), []byte(victim), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.RemoveSandbox(t.Context(), p.UID); err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		if _, err := os.Stat(dir); err != nil {
			t.Errorf("the cgroup %s a cgroup file named was removed: %v", dir, err)
		}
	}
	e.sandboxGone(p.UID, "removed")

	old := e.pod(false)
	e.sandbox(old)
	cgFile := filepath.Join(e.rt.podDir(old.UID), "cgroup")
	if err := os.Remove(cgFile); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(cgFile, 0o700); err != nil { // cannot be written
		t.Fatal(err)
	}
	oldRoot := e.restartWithAnotherCgroupRoot()
	if err := e.rt.RemoveSandbox(t.Context(), old.UID); err != nil {
		t.Fatalf("removal of an older daemon's sandbox whose cgroup file cannot be written: %v", err)
	}
	e.sandboxGone(old.UID, "older daemon's")
	e.cgroupGone(oldRoot, old.UID, "older daemon's")
}
