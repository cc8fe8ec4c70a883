package source

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestStampVouchesOnlyForSettledContent(t *testing.T) {
	changed := time.Unix(1000, 123456789)
	s := fileStamp{dev: 1, ino: 2, size: 3, mtime: changed, ctime: changed, ok: true}
	for _, c := range []struct {
		name     string
		last     fileStamp
		now      fileStamp
		expected bool
	}{
		{"read long after the change, unchanged since", s.settled(changed.Add(racyWindow)), s, true},
		{"read right after the change: a write in the same tick hides", s.settled(changed.Add(racyWindow - time.Millisecond)), s, false},
		{"read before the change", s.settled(changed.Add(-time.Second)), s, false},
		{"another file under the name", s.settled(changed.Add(time.Hour)), fileStamp{dev: 1, ino: 9, size: 3, mtime: changed, ctime: changed, ok: true}, false},
		{"another size", s.settled(changed.Add(time.Hour)), fileStamp{dev: 1, ino: 2, size: 4, mtime: changed, ctime: changed, ok: true}, false},
		{"changed, mtime put back", s.settled(changed.Add(time.Hour)), fileStamp{dev: 1, ino: 2, size: 3, mtime: changed, ctime: changed.Add(time.Nanosecond), ok: true}, false},
		{"no stat to go by", fileStamp{}.settled(changed.Add(time.Hour)), fileStamp{}, false},
	} {
		if got := stampCurrent(c.last, c.now); got != c.expected {
			t.Errorf("%s: current = %v, want %v", c.name, got, c.expected)
		}
	}
}

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

// A file system that stamps whole seconds (ext4's small inodes, many NFS
// servers; FAT two) keeps the stamp of a write later in the same second:
// only a read two seconds after it is settled.
func TestStampOfWholeSecondsSettlesLater(t *testing.T) {
	changed := time.Unix(1000, 0)
	s := fileStamp{dev: 1, ino: 2, size: 3, mtime: changed, ctime: changed, ok: true}
	if stampCurrent(s.settled(changed.Add(time.Second-time.Millisecond)), s) {
		t.Errorf("a read within the second of a whole-second stamp vouches for the content")
	}
	if !stampCurrent(s.settled(changed.Add(coarseWindow)), s) {
		t.Errorf("a read %v after a whole-second stamp does not vouch for the content", coarseWindow)
	}
}
