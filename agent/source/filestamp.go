package source

import "time"

// racyWindow is how long before a read a file must have last changed for
// its stat to stand for the content read. A write lands on the clock the
// kernel stamps files with, which lags the real one by up to a tick: a
// file changed again within that tick of a read keeps the stat of the
// content read (git's "racily clean" entries). One changed this long
// before the read cannot be.
const racyWindow = settleTime

// coarseWindow is racyWindow for a file system that stamps whole seconds
// (ext4's small inodes, many NFS servers; FAT two): a write later in the
// second of a read keeps the stamp read with it.
const coarseWindow = 2 * time.Second

// fileStamp is what a stat says of a file's content: which file, how long,
// and when it last changed. ok is false for a stamp that cannot vouch for
// the content read with it.
type fileStamp struct {
	dev, ino     uint64
	size         int64
	mtime, ctime time.Time
	ok           bool
}

// settled is s, vouching for the content read at readAt (taken before the
// stat) when the file had not changed for racyWindow then.
func (s fileStamp) settled(readAt time.Time) fileStamp {
	window := racyWindow
	if s.mtime.Nanosecond() == 0 && s.ctime.Nanosecond() == 0 {
		window = coarseWindow
	}
	s.ok = s.ok && readAt.Sub(s.mtime) >= window && readAt.Sub(s.ctime) >= window
	return s
}

// stampCurrent reports whether a file whose last read had stamp last, and
// whose stat is now, still holds the content read then.
func stampCurrent(last, now fileStamp) bool {
	return last.ok && now.ok && last.dev == now.dev && last.ino == now.ino && last.size == now.size &&
		last.mtime.Equal(now.mtime) && last.ctime.Equal(now.ctime)
}
