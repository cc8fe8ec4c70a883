package filestamp

import (
	"testing"
	"time"
)

func TestStampVouchesOnlyForSettledContent(t *testing.T) {
	const window = 500 * time.Millisecond
	changed := time.Unix(1000, 123456789)
	s := Stamp{dev: 1, ino: 2, size: 3, mtime: changed, ctime: changed, ok: true}
	for _, c := range []struct {
		name     string
		last     Stamp
		now      Stamp
		expected bool
	}{
		{"read long after the change, unchanged since", s.Settled(changed.Add(window), window), s, true},
		{"read right after the change: a write in the same tick hides", s.Settled(changed.Add(window-time.Millisecond), window), s, false},
		{"read before the change", s.Settled(changed.Add(-time.Second), window), s, false},
		{"another file under the name", s.Settled(changed.Add(time.Hour), window), Stamp{dev: 1, ino: 9, size: 3, mtime: changed, ctime: changed, ok: true}, false},
		{"another size", s.Settled(changed.Add(time.Hour), window), Stamp{dev: 1, ino: 2, size: 4, mtime: changed, ctime: changed, ok: true}, false},
		{"changed, mtime put back", s.Settled(changed.Add(time.Hour), window), Stamp{dev: 1, ino: 2, size: 3, mtime: changed, ctime: changed.Add(time.Nanosecond), ok: true}, false},
		{"no stat to go by", Stamp{}.Settled(changed.Add(time.Hour), window), Stamp{}, false},
	} {
		if got := Current(c.last, c.now); got != c.expected {
			t.Errorf("%s: current = %v, want %v", c.name, got, c.expected)
		}
	}
}

// A file system that stamps whole seconds (ext4's small inodes, many NFS
// servers; FAT two) keeps the stamp of a write later in the same second:
// only a read Coarse after it is settled, whatever the window asked.
func TestStampOfWholeSecondsSettlesLater(t *testing.T) {
	changed := time.Unix(1000, 0)
	s := Stamp{dev: 1, ino: 2, size: 3, mtime: changed, ctime: changed, ok: true}
	if Current(s.Settled(changed.Add(time.Second-time.Millisecond), 0), s) {
		t.Errorf("a read within the second of a whole-second stamp vouches for the content")
	}
	if !Current(s.Settled(changed.Add(Coarse), 0), s) {
		t.Errorf("a read %v after a whole-second stamp does not vouch for the content", Coarse)
	}
}
