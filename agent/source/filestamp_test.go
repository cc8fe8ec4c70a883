package source

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A manifest rewritten in place with as many bytes right after a list read
// it keeps a stat that may equal the one that list saw: it is read again,
// not taken for unchanged.
func TestSameSizeRewriteRightAfterAListIsRead(t *testing.T) {
	dir := t.TempDir()
	ch := start(t, dir, time.Hour) // changes must come from inotify, not relists
	next(t, ch)
	path := filepath.Join(dir, "web.yaml")
	writeFile(t, path, podYAML("web", "busybox:1"))
	waitFor(t, ch, "web with busybox:1", func(u Update) bool {
		return len(u.Pods) == 1 && u.Pods[0].Spec.Containers[0].Image == "busybox:1"
	})
	writeFile(t, path, podYAML("web", "busybox:2"))
	waitFor(t, ch, "web with busybox:2", func(u Update) bool {
		return len(u.Pods) == 1 && u.Pods[0].Spec.Containers[0].Image == "busybox:2"
	})
	// Settled, then rewritten in place with as many bytes again.
	time.Sleep(racyWindow)
	renameIn(t, dir, "other.yaml", podYAML("other", "busybox:1")) // a list that finds web unchanged
	waitFor(t, ch, "other", hasPods("other-node1", "web-node1"))
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(podYAML("web", "busybox:3")); err != nil {
		t.Fatal(err)
	}
	f.Close()
	waitFor(t, ch, "web with busybox:3", func(u Update) bool {
		for _, p := range u.Pods {
			if p.Name == "web-node1" && p.Spec.Containers[0].Image == "busybox:3" {
				return true
			}
		}
		return false
	})
}
