package manifest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Only the current run's log and the one before it stay, each with the
// files rotation made of it.
func TestPruneLogs(t *testing.T) {
	p := Paths{PodLogsDir: t.TempDir()}
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-node1", UID: "u1"}}
	dir := filepath.Join(p.LogDir(pod), "c")
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
	if err := PruneLogs(pod, "c", 2, p); err != nil {
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
	if err := PruneLogs(pod, "nothere", 5, p); err != nil {
		t.Errorf("pruning a container without logs: %v", err)
	}
}

// A container's log directory, or its pod's, swapped for a symlink to a
// host directory (by a container that mounts podLogsDir) is not pruned
// through, and neither is a pod's log directory removed through one.
func TestPruneLogsNotThroughSwappedDir(t *testing.T) {
	for _, which := range []string{"container", "pod"} {
		t.Run(which, func(t *testing.T) {
			p := Paths{PodLogsDir: t.TempDir()}
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-node1", UID: "u1"}}
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
			swapped := filepath.Join(p.LogDir(pod), "c")
			if which == "pod" {
				swapped = p.LogDir(pod)
			} else if err := os.Mkdir(p.LogDir(pod), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(host, swapped); err != nil {
				t.Fatal(err)
			}
			err := PruneLogs(pod, "c", 5, p)
			t.Logf("prune: %v", err)
			if err := RemoveLogs("u1", p); err != nil {
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
