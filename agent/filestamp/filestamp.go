// Package filestamp tells whether a file still holds the content read from
// it without reading it again: by its stat (device, inode, size, mtime,
// ctime), trusted only when the file had not changed for a while before the
// read (git's "racily clean" entries). The manifest source and the
// restart-on-change watcher both go by it.
package filestamp

import (
	"io/fs"
	"time"
)

// Coarse is the least window for a file system that stamps whole seconds
// (ext4's small inodes, many NFS servers; FAT two, its ctime its mtime): a
// write later in the second of a read keeps the stamp read with it. It is
// FAT's two seconds and more than the tick the kernel's clock lags by: a
// read 2 s after a FAT stamp of 10 s, at 12 s, is followed by a write that
// the kernel's clock, a few ms behind, stamps 11.99 s, truncated to 10 s.
const Coarse = 3 * time.Second

// Stamp is what a stat says of a file's content: which file, how long, and
// when it last changed. A write changes the ctime, which no one but the
// kernel sets, and a file renamed over is another inode. The zero Stamp
// vouches for nothing.
type Stamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime time.Time
	ok           bool
}

// Of is fi's stamp: zero where the change time is not at hand (not Linux),
// so that every look reads the file.
func Of(fi fs.FileInfo) Stamp { return stampOf(fi) }

// Settled is s, vouching for the content read at readAt (taken before the
// stat) when the file had not changed for window then (Coarse at least for
// whole-second stamps). A write lands on the clock the kernel stamps files
// with, which lags the real one by up to a tick: a file changed again
// within that tick of a read keeps the stat of the content read.
func (s Stamp) Settled(readAt time.Time, window time.Duration) Stamp {
	if s.mtime.Nanosecond() == 0 && s.ctime.Nanosecond() == 0 {
		window = max(window, Coarse)
	}
	s.ok = s.ok && readAt.Sub(s.mtime) >= window && readAt.Sub(s.ctime) >= window
	return s
}

// Current reports whether a file whose last read had the stamp last (made
// Settled), and whose stat is now now, still holds the content read then.
func Current(last, now Stamp) bool {
	return last.ok && now.ok && last.dev == now.dev && last.ino == now.ino && last.size == now.size &&
		last.mtime.Equal(now.mtime) && last.ctime.Equal(now.ctime)
}
