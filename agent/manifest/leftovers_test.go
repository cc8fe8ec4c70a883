package manifest

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestRemoveLeftoverPodDirsKeepsClaimed(t *testing.T) {
	p := Paths{RootDir: t.TempDir()}
	for _, uid := range []string{"kept", "stale1", "stale2"} {
		if err := os.MkdirAll(filepath.Join(p.EmptyDir(uid, "data")), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(p.PodDir(uid), "seen"), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveLeftoverPodDirs(map[string]bool{"kept": true}, p)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Sort(removed); !slices.Equal(removed, []string{"stale1", "stale2"}) {
		t.Errorf("removed %q, want stale1 and stale2", removed)
	}
	entries, _ := os.ReadDir(filepath.Join(p.RootDir, "pods"))
	if len(entries) != 1 || entries[0].Name() != "kept" {
		t.Errorf("pods dir holds %v, want only kept", entries)
	}
	// No pods directory at all is nothing to do.
	if removed, err := RemoveLeftoverPodDirs(nil, Paths{RootDir: t.TempDir()}); err != nil || len(removed) != 0 {
		t.Errorf("empty root: removed %q, %v", removed, err)
	}
}

// A daemon killed after it removed a pod's sandbox and directory but before
// its logs left the log directory with nothing else of the pod (the chaos
// soak found one after every pod was gone): the next daemon's sweep removes
// it, and only log directories of unclaimed UIDs.
func TestRemoveLeftoverLogsKeepsClaimed(t *testing.T) {
	p := Paths{PodLogsDir: t.TempDir()}
	for _, name := range []string{"default_web-node_kept", "default_web-node_stale", "kube-system_etcd-node_stale2", "not-a-pod-dir", "a_b"} {
		if err := os.MkdirAll(filepath.Join(p.PodLogsDir, name, "main"), 0o750); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(p.PodLogsDir, "x_y_file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	removed, err := RemoveLeftoverLogs(map[string]bool{"kept": true}, p)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Sort(removed); !slices.Equal(removed, []string{"stale", "stale2"}) {
		t.Errorf("removed %q, want stale and stale2", removed)
	}
	var left []string
	entries, _ := os.ReadDir(p.PodLogsDir)
	for _, e := range entries {
		left = append(left, e.Name())
	}
	if want := []string{"a_b", "default_web-node_kept", "not-a-pod-dir", "x_y_file"}; !slices.Equal(left, want) {
		t.Errorf("log dir holds %q, want %q", left, want)
	}
	if removed, err := RemoveLeftoverLogs(nil, Paths{PodLogsDir: filepath.Join(t.TempDir(), "none")}); err != nil || len(removed) != 0 {
		t.Errorf("no log dir: removed %q, %v", removed, err)
	}
}
