package volumes

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/staticpodd/staticpodd/agent/poddir"
)

func TestRemoveLeftoverPodDirsKeepsClaimed(t *testing.T) {
	root := poddir.Root(t.TempDir())
	for _, uid := range []string{"kept", "stale1", "stale2"} {
		if err := os.MkdirAll(filepath.Join(root.EmptyDir(uid, "data")), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(root.Seen(uid), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := RemoveLeftovers(map[string]bool{"kept": true}, root)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Sort(removed); !slices.Equal(removed, []string{"stale1", "stale2"}) {
		t.Errorf("removed %q, want stale1 and stale2", removed)
	}
	entries, _ := os.ReadDir(root.Pods())
	if len(entries) != 1 || entries[0].Name() != "kept" {
		t.Errorf("pods dir holds %v, want only kept", entries)
	}
	// No pods directory at all is nothing to do.
	if removed, err := RemoveLeftovers(nil, poddir.Root(t.TempDir())); err != nil || len(removed) != 0 {
		t.Errorf("empty root: removed %q, %v", removed, err)
	}
}
