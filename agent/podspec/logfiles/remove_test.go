package logfiles

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Only the current run's log and the one before it stay, each with the
// files rotation made of it.
func TestPruneRuns(t *testing.T) {
	podLogsDir := t.TempDir()
	dir := filepath.Join(podLogsDir, "default_web-node1_u1", "c")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"0.log", "0.log.20260102-150405.gz", "1.log", "1.log.20260102-150406.gz",
		"1.log.20260102-150407", "1.log.20260102-150408.tmp", "2.log", "2.log.20260102-150409.gz",
		"2.log.20260102-150410", "3.log", "notes.txt"} {
		if err := os.WriteFile(filepath.Join(dir, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := PruneRuns(dir, 2); err != nil {
		t.Fatal(err)
	}
	var left []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		left = append(left, e.Name())
	}
	if got, want := strings.Join(left, " "), "2.log 2.log.20260102-150409.gz 2.log.20260102-150410 3.log notes.txt"; got != want {
		t.Errorf("left %q, want %q", got, want)
	}
	if err := PruneRuns(filepath.Join(podLogsDir, "default_web-node1_u1", "nothere"), 5); err != nil {
		t.Errorf("pruning a container without logs: %v", err)
	}
}

// A container's log directory, or its pod's, swapped for a symlink to a
// host directory (by a container that mounts podLogsDir) is not pruned
// through, and neither is a pod's log directory removed through one.
func TestPruneRunsNotThroughSwappedDir(t *testing.T) {
	for _, which := range []string{"container", "pod"} {
		t.Run(which, func(t *testing.T) {
			podLogsDir := t.TempDir()
			podDir := filepath.Join(podLogsDir, "default_web-node1_u1")
			host := t.TempDir()
			files := []string{"0.log", "0.log.20200101-000000", "c/0.log", "c/0.log.20200101-000000"}
			for _, f := range files {
				if err := os.MkdirAll(filepath.Dir(filepath.Join(host, f)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(host, f), []byte("a host file\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			swapped := filepath.Join(podDir, "c")
			if which == "pod" {
				swapped = podDir
			} else if err := os.Mkdir(podDir, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(host, swapped); err != nil {
				t.Fatal(err)
			}
			err := PruneRuns(filepath.Join(podDir, "c"), 5)
			t.Logf("prune: %v", err)
			if err := RemovePodLogs(podLogsDir, "u1"); err != nil {
				t.Errorf("remove logs: %v", err)
			}
			for _, f := range files {
				if _, err := os.Stat(filepath.Join(host, f)); err != nil {
					t.Errorf("host file %s removed through the swapped %s directory: %v", f, which, err)
				}
			}
		})
	}
}

// A daemon killed after it removed a pod's sandbox and directory but before
// its logs left the log directory with nothing else of the pod (the chaos
// soak found one after every pod was gone): the next daemon's sweep removes
// it, and only log directories of unclaimed UIDs.
func TestRemoveLeftoverPodLogsKeepsClaimed(t *testing.T) {
	podLogsDir := t.TempDir()
	for _, name := range []string{"default_web-node_kept", "default_web-node_stale", "kube-system_etcd-node_stale2", "not-a-pod-dir", "a_b"} {
		if err := os.MkdirAll(filepath.Join(podLogsDir, name, "main"), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(podLogsDir, "x_y_file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveLeftoverPodLogs(podLogsDir, map[string]bool{"kept": true})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Sort(removed); !slices.Equal(removed, []string{"stale", "stale2"}) {
		t.Errorf("removed %q, want stale and stale2", removed)
	}
	var left []string
	entries, _ := os.ReadDir(podLogsDir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"a_b", "default_web-node_kept", "not-a-pod-dir", "x_y_file"}; !slices.Equal(left, want) {
		t.Errorf("log dir holds %q, want %q", left, want)
	}
	if removed, err := RemoveLeftoverPodLogs(filepath.Join(t.TempDir(), "none"), nil); err != nil || len(removed) != 0 {
		t.Errorf("no log dir: removed %q, %v", removed, err)
	}
}

// RemovePodLogs removes the log directories of its pod's UID only, under
// any namespace and name, and nothing of a UID that merely ends the same,
// one with a "_" included (a manifest may set its own UID); a log
// directory that is not a directory (a file, a FIFO) holds nothing to
// remove.
func TestRemovePodLogsTakesItsUIDOnly(t *testing.T) {
	podLogsDir := t.TempDir()
	for _, name := range []string{"default_web-node_u1", "kube-system_web-node_u1", "default_web-node_xu1", "default_web-node_u10", "default_web-node_x_u1", "u1"} {
		if err := os.MkdirAll(filepath.Join(podLogsDir, name, "main"), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := RemovePodLogs(podLogsDir, "u1"); err != nil {
		t.Fatal(err)
	}
	es, err := os.ReadDir(podLogsDir)
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, e := range es {
		left = append(left, e.Name())
	}
	if want := []string{"default_web-node_u10", "default_web-node_x_u1", "default_web-node_xu1", "u1"}; !slices.Equal(left, want) {
		t.Errorf("left %q, want %q", left, want)
	}
	if err := RemovePodLogs(filepath.Join(podLogsDir, "missing"), "u1"); err != nil {
		t.Errorf("RemovePodLogs without a log directory: %v", err)
	}
	fifo := filepath.Join(t.TempDir(), "pods")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- RemovePodLogs(fifo, "u1") }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("RemovePodLogs of a FIFO in the log directory's place: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("RemovePodLogs blocked on a FIFO in the log directory's place")
	}
}
