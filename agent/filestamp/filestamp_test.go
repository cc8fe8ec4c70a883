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

// A write made after a read must not keep the stamp that read vouched for.
// The kernel stamps a write with its clock as of its last tick (up to 10 ms
// behind the real one at HZ=100), truncated to the file system's
// granularity: whole seconds (ext4's small inodes), two seconds (FAT, whose
// ctime is its mtime). A read 2 s after a FAT stamp of 10 s is at 12 s; a
// write a few ms later, stamped 11.99 s, is stamped 10 s again: the same
// stamp, the same size, another content.
func TestStampOfCoarseFileSystemsHidesNoLaterWrite(t *testing.T) {
	const tick = 10 * time.Millisecond
	base := time.Unix(1000, 0)
	for _, gran := range []time.Duration{time.Second, 2 * time.Second} {
		// stamp is the stamp of a file of 3 bytes written at real time at
		// by a kernel whose clock lags by lag.
		stamp := func(at time.Time, lag time.Duration) Stamp {
			ts := at.Add(-lag).Truncate(gran)
			return Stamp{dev: 1, ino: 2, size: 3, mtime: ts, ctime: ts, ok: true}
		}
		for first := time.Duration(0); first < 2*gran; first += 50 * time.Millisecond {
			written := base.Add(first)
			for after := time.Duration(0); after < 2*gran+2*tick; after += time.Millisecond {
				readAt := written.Add(after)
				last := stamp(written, 0).Settled(readAt, 0)
				for _, lag := range []time.Duration{0, tick / 2, tick} {
					// The second write comes after the read, which starts
					// at readAt.
					if w := readAt.Add(time.Millisecond); Current(last, stamp(w, lag)) {
						t.Fatalf("granularity %v: a file written at %v, read at %v, then written at %v (kernel clock %v behind): the second write keeps the stamp the read vouched for",
							gran, written.Sub(base), readAt.Sub(base), w.Sub(base), lag)
					}
				}
			}
		}
	}
}
