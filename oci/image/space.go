package image

import (
	"fmt"
	"io"
	"math"
	"sync"

	"golang.org/x/sys/unix"
)

// DefaultReservePercent is the share of the store's filesystem an import leaves
// free unless WithReserve says otherwise: 100 minus the kubelet's default
// imageGCHighThresholdPercent (85).
const DefaultReservePercent = 15

// Option configures a Store.
type Option func(*Store)

// WithReserve makes every import leave percent% of the store's filesystem free:
// an import that would write past that fails before it does, with the store
// unchanged. 0 lets an import fill the filesystem.
func WithReserve(percent int) Option {
	return func(s *Store) { s.reservePercent = min(max(percent, 0), 100) }
}

// blockSize is what a directory, or the tail of a file, costs on disk.
const blockSize = 4096

// recheckEvery is how many bytes an import writes between two looks at the
// filesystem's free space, which others may be using up meanwhile.
const recheckEvery = 64 << 20

// statfs returns the bytes free to an unprivileged writer and the size of the
// filesystem holding path.
func statfs(path string) (free, size uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return uint64(st.Bavail) * uint64(st.Bsize), uint64(st.Blocks) * uint64(st.Bsize), nil
}

// space bounds what one import writes by the free space it must leave on the
// store's filesystem. Regular files are charged their size from the tar header
// before a byte is written; a decompressed archive as it is written. Not safe
// for concurrent use; a nil *space bounds nothing.
type space struct {
	dir     string // the store's root
	statfs  func(string) (free, size uint64, err error)
	percent int
	reserve uint64 // bytes to leave free
	allowed uint64 // what this import may write: free at its start less the reserve
	written uint64 // charged so far
	checked uint64 // written when statfs was last asked
	shared  *sharedSpace
	base    uint64 // shared.total at the start
	pre     uint64 // shared.live at the start

	// Inodes, where the filesystem has a fixed number of them: an empty
	// file, a symlink or a device costs no bytes, one inode.
	inodesCounted bool
	inodeReserve  uint64 // inodes to leave free
	inodesAllowed uint64 // free at the start less the reserve
	inodes        uint64 // charged so far
	ibase, ipre   uint64 // shared.inodes, shared.inodesLive at the start
}

// sharedSpace is what the imports running side by side have charged: the
// free space an import saw at its start does not show what the others write
// after it, nor what they have charged and not yet written. (Pulls from
// different registries, and critical pods' pulls, run at once.)
type sharedSpace struct {
	mu    sync.Mutex
	total uint64 // charged by every import since the store opened
	live  uint64 // charged by the imports not yet released
	// The same, of inodes.
	inodes, inodesLive uint64
}

// statinodes returns the inodes free and the inodes of the filesystem
// holding path; 0 of 0 where it has no fixed number (btrfs).
func statinodes(path string) (free, total uint64, err error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return 0, 0, fmt.Errorf("statfs %s: %w", path, err)
	}
	return st.Ffree, st.Files, nil
}

// Headroom is how many bytes may still be written on the store's filesystem
// before it is left with less free than an import leaves (WithReserve), the
// imports under way counted: what a caller staging an archive beside the
// store (a bundle, before its signature can be checked) may write. It fails
// if the filesystem is below the reserve already.
func (s *Store) Headroom() (int64, error) {
	sp, err := s.newSpace()
	if err != nil {
		return 0, err
	}
	defer sp.release()
	return int64(min(sp.allowed-min(sp.allowed, sp.pre), math.MaxInt64)), nil
}

// newSpace looks at the free space of the store's filesystem, and fails if it is
// already below the reserve.
func (s *Store) newSpace() (*space, error) {
	free, size, err := s.statfs(s.root)
	if err != nil {
		return nil, err
	}
	p := uint64(s.reservePercent)
	sp := &space{dir: s.root, statfs: s.statfs, percent: s.reservePercent, reserve: size/100*p + size%100*p/100}
	if free < sp.reserve {
		return nil, fmt.Errorf("%s free of %s on the filesystem of %s, less than the %d%% (%s) an import leaves free: nothing written",
			humanBytes(free), humanBytes(size), s.root, sp.percent, humanBytes(sp.reserve))
	}
	sp.allowed = free - sp.reserve
	ifree, itotal, err := s.statinodes(s.root)
	if err != nil {
		return nil, err
	}
	if itotal > 0 {
		sp.inodesCounted = true
		sp.inodeReserve = itotal/100*p + itotal%100*p/100
		if ifree < sp.inodeReserve {
			return nil, fmt.Errorf("%d inodes free of %d on the filesystem of %s, less than the %d%% (%d) an import leaves free: nothing written",
				ifree, itotal, s.root, sp.percent, sp.inodeReserve)
		}
		sp.inodesAllowed = ifree - sp.inodeReserve
	}
	sp.shared = &s.space
	s.space.mu.Lock()
	sp.base, sp.pre = s.space.total, s.space.live
	sp.ibase, sp.ipre = s.space.inodes, s.space.inodesLive
	s.space.mu.Unlock()
	return sp, nil
}

// takeInode charges one inode about to be made (a directory, a file, a
// symlink, a device), and fails if it would take the filesystem's free
// inodes below the reserve: a layer of empty files costs no bytes.
func (sp *space) takeInode() error {
	if sp == nil || !sp.inodesCounted {
		return nil
	}
	sp.shared.mu.Lock()
	defer sp.shared.mu.Unlock()
	if sp.shared.inodes-sp.ibase+sp.ipre+1 > sp.inodesAllowed {
		return fmt.Errorf("the import would leave less than %d%% (%d) of the inodes of the filesystem of %s free: stopped after %d",
			sp.percent, sp.inodeReserve, sp.dir, sp.inodes)
	}
	sp.shared.inodes++
	sp.shared.inodesLive++
	sp.inodes++
	return nil
}

// release gives back what sp charged once its import has ended (its files
// are then in the filesystem's free space, or gone).
func (sp *space) release() {
	if sp == nil || sp.shared == nil {
		return
	}
	sp.shared.mu.Lock()
	sp.shared.live -= sp.written
	sp.shared.inodesLive -= sp.inodes
	sp.shared.mu.Unlock()
	sp.shared = nil
}

// take charges n bytes about to be written, and fails if they would take the
// filesystem below the reserve.
func (sp *space) take(n uint64) error {
	if sp == nil {
		return nil
	}
	// What everyone charged since sp's start, and (as if none of it were
	// written yet) what the others had charged before, must fit.
	sp.shared.mu.Lock()
	if sp.shared.total-sp.base+sp.pre+n > sp.allowed {
		sp.shared.mu.Unlock()
		return sp.full()
	}
	sp.shared.total += n
	sp.shared.live += n
	sp.shared.mu.Unlock()
	sp.written += n
	if sp.written-sp.checked >= recheckEvery {
		sp.checked = sp.written
		free, _, err := sp.statfs(sp.dir)
		if err != nil {
			return err
		}
		if free < sp.reserve {
			return sp.full()
		}
	}
	return nil
}

func (sp *space) full() error {
	return fmt.Errorf("the import would leave less than %d%% (%s) of the filesystem of %s free: stopped after writing %s",
		sp.percent, humanBytes(sp.reserve), sp.dir, humanBytes(sp.written))
}

// takeFile charges a regular file of size bytes, rounded up to whole blocks.
func (sp *space) takeFile(size int64) error {
	if size <= 0 {
		return nil
	}
	return sp.take((uint64(size) + blockSize - 1) / blockSize * blockSize)
}

// spaceWriter charges what goes through it before writing it.
type spaceWriter struct {
	w  io.Writer
	sp *space
}

func (w spaceWriter) Write(p []byte) (int, error) {
	if err := w.sp.take(uint64(len(p))); err != nil {
		return 0, err
	}
	return w.w.Write(p)
}

func humanBytes(n uint64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1fGiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1fMiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1fKiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%dB", n)
}
