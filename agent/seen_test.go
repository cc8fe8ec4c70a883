package agent

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

// config.seen survives a daemon restart (a new store on the same root) and goes
// with the pod's directory.
func TestSeenSurvivesRestart(t *testing.T) {
	paths := manifest.Paths{RootDir: t.TempDir()}
	first := NewSeenStore(paths).Seen("u1")
	if again := NewSeenStore(paths).Seen("u1"); !again.Equal(first) {
		t.Errorf("seen after a restart = %v, want %v", again, first)
	}
	if err := os.RemoveAll(paths.PodDir("u1")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(paths.RootDir, "pods", "u1")); !os.IsNotExist(err) {
		t.Fatalf("pod dir still there: %v", err)
	}
	if later := NewSeenStore(paths).Seen("u1"); !later.After(first) {
		t.Errorf("a pod seen anew after its removal kept its old time %v", later)
	}
}
