//go:build linux && cgo

package monitor

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// Under the systemd driver a container's scope (and its memory.events) may
// be gone by the time the monitor looks: the pod's hierarchical count decides.
func TestOOMKilledSince(t *testing.T) {
	pod := t.TempDir()
	ctr := filepath.Join(pod, "staticpodd-c1.scope")
	write := func(path, oomKills string) {
		t.Helper()
		if err := os.WriteFile(path, []byte("low 0\nhigh 0\nmax 3\noom 1\noom_kill "+oomKills+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(pod, "memory.events"), "2")
	paths := map[string]string{"": ctr}
	before, ok := podOOMKills(paths)
	if !ok || before != 2 {
		t.Fatalf("podOOMKills = %d, %v; want 2, true", before, ok)
	}
	// The scope is still there: its own count decides.
	if err := os.Mkdir(ctr, 0o755); err != nil {
		t.Fatal(err)
	}
	write(filepath.Join(ctr, "memory.events"), "0")
	write(filepath.Join(pod, "memory.events"), "3")
	if oomKilledSince(paths, before, true, int(unix.SIGKILL)) {
		t.Error("killed although the container's own count is 0")
	}
	write(filepath.Join(ctr, "memory.events"), "1")
	if !oomKilledSince(paths, before, true, int(unix.SIGKILL)) {
		t.Error("not killed although the container's own count is 1")
	}
	// The scope is gone: a SIGKILL while the pod's count rose is an OOM kill.
	if err := os.RemoveAll(ctr); err != nil {
		t.Fatal(err)
	}
	if !oomKilledSince(paths, before, true, int(unix.SIGKILL)) {
		t.Error("scope gone, pod count rose, SIGKILL: not taken for an OOM kill")
	}
	if oomKilledSince(paths, before, true, int(unix.SIGTERM)) {
		t.Error("a SIGTERM taken for an OOM kill")
	}
	if oomKilledSince(paths, 3, true, int(unix.SIGKILL)) {
		t.Error("taken for an OOM kill although the pod's count did not change")
	}
	if oomKilledSince(paths, before, false, int(unix.SIGKILL)) {
		t.Error("taken for an OOM kill without a count from the start")
	}
}

// On a cgroup v1 hybrid host libcontainer names the unified hierarchy too
// (paths[""]), where there is no memory.events: the v1 memory cgroup's
// memory.oom_control decides, as on pure v1.
func TestOOMKilledSinceHybrid(t *testing.T) {
	memory, unified := t.TempDir(), t.TempDir()
	paths := map[string]string{"memory": memory, "": unified}
	write := func(oomKills string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(memory, "memory.oom_control"),
			[]byte("oom_kill_disable 0\nunder_oom 0\noom_kill "+oomKills+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("1")
	if !oomKilledSince(paths, 0, false, int(unix.SIGKILL)) {
		t.Error("hybrid: the v1 memory cgroup counts an OOM kill, not taken for one")
	}
	write("0")
	if oomKilledSince(paths, 0, false, int(unix.SIGKILL)) {
		t.Error("hybrid: taken for an OOM kill although the v1 count is 0")
	}
}
