package agent

import (
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
)

func restartPods() map[string]manifest.Pod {
	return map[string]manifest.Pod{
		"default/a-n": {Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a-n", Namespace: "default", UID: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}},
		"default/b-n": {Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "b-n", Namespace: "default", UID: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}}},
	}
}

// A restart changes only its pod's UID, and the same UID again once the
// markers are read back from disk, as after a daemon restart.
func TestRestartsPersist(t *testing.T) {
	root := t.TempDir()
	r := loadRestarts(root, slog.Default())
	at, err := r.mark("default/a-n")
	if err != nil {
		t.Fatal(err)
	}
	if at2, _ := r.mark("default/a-n"); at2 == at {
		t.Errorf("two restarts, one marker %s", at)
	}
	pods := restartPods()
	r.apply(pods, true, slog.Default())
	if pods["default/a-n"].UID == "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" || pods["default/b-n"].UID != "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb" {
		t.Fatalf("UIDs after a restart of a: %s %s", pods["default/a-n"].UID, pods["default/b-n"].UID)
	}
	again := restartPods()
	loadRestarts(root, slog.Default()).apply(again, true, slog.Default())
	if again["default/a-n"].UID != pods["default/a-n"].UID {
		t.Errorf("read back: UID %s, want %s", again["default/a-n"].UID, pods["default/a-n"].UID)
	}
}

// A pod name gone from a complete set loses its marker, on disk too; from
// an incomplete one (a source not heard from yet) it keeps it.
func TestRestartsForgetRemoved(t *testing.T) {
	root := t.TempDir()
	r := loadRestarts(root, slog.Default())
	if _, err := r.mark("default/a-n"); err != nil {
		t.Fatal(err)
	}
	r.apply(map[string]manifest.Pod{}, false, slog.Default())
	if len(loadRestarts(root, slog.Default()).at) != 1 {
		t.Fatal("forgot a marker before every source spoke")
	}
	r.apply(map[string]manifest.Pod{}, true, slog.Default())
	if n := len(loadRestarts(root, slog.Default()).at); n != 0 {
		t.Errorf("%d markers kept for removed pods", n)
	}
	pods := restartPods()
	r.apply(pods, true, slog.Default())
	if pods["default/a-n"].UID != "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
		t.Errorf("written back, the pod has UID %s", pods["default/a-n"].UID)
	}
}

// A marker that cannot be saved is no restart: the next daemon would undo it.
func TestRestartsUnsaved(t *testing.T) {
	root := t.TempDir()
	r := loadRestarts(root, slog.Default())
	if err := os.Mkdir(filepath.Join(root, restartsFile), 0o700); err != nil { // a directory: the rename fails
		t.Fatal(err)
	}
	if _, err := r.mark("default/a-n"); err == nil {
		t.Fatal("marked without saving")
	}
	pods := restartPods()
	r.apply(pods, false, slog.Default())
	if pods["default/a-n"].UID != "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" {
		t.Errorf("an unsaved restart changed the UID to %s", pods["default/a-n"].UID)
	}
}

// A file that is not the markers' (damaged, or not JSON) is no marker.
func TestRestartsUnreadable(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, restartsFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := loadRestarts(root, slog.Default()); len(r.at) != 0 {
		t.Errorf("markers %v", r.at)
	}
}

// A FIFO in the markers' place is no marker, and does not hang the start.
func TestRestartsFIFO(t *testing.T) {
	root := t.TempDir()
	if err := syscall.Mkfifo(filepath.Join(root, restartsFile), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := loadRestarts(root, slog.Default()); len(r.at) != 0 {
		t.Errorf("markers %v", r.at)
	}
}

// Markers forgotten while the disk refused the write (full, say) leave the
// file at the next apply that can write it, with no restart or removal
// needed to trigger it.
func TestRestartsForgetRetried(t *testing.T) {
	base := t.TempDir()
	root := filepath.Join(base, "root")
	if err := os.Mkdir(root, 0o700); err != nil {
		t.Fatal(err)
	}
	r := loadRestarts(root, slog.Default())
	if _, err := r.mark("default/a-n"); err != nil {
		t.Fatal(err)
	}
	away := filepath.Join(base, "away")
	if err := os.Rename(root, away); err != nil { // every write fails
		t.Fatal(err)
	}
	r.apply(map[string]manifest.Pod{}, true, slog.Default())
	if err := os.Rename(away, root); err != nil {
		t.Fatal(err)
	}
	if n := len(loadRestarts(root, slog.Default()).at); n != 1 {
		t.Fatalf("the failed write changed the file: %d markers", n)
	}
	r.apply(map[string]manifest.Pod{}, true, slog.Default())
	if n := len(loadRestarts(root, slog.Default()).at); n != 0 {
		t.Errorf("%d markers kept on disk for removed pods after a write could succeed", n)
	}
}
