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
