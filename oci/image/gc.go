package image

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
)

// GCPolicy is the kubelet's ImageGCPolicy: when image garbage collection
// frees space, down to where, and which images are too young or too old.
type GCPolicy struct {
	// HighThresholdPercent of the store's filesystem used starts a
	// collection; 100 never starts one (MaxAge still applies).
	HighThresholdPercent int
	// LowThresholdPercent is the usage a collection frees space down to.
	LowThresholdPercent int
	// MinAge: an image imported less than this long ago is never removed
	// to free space.
	MinAge time.Duration
	// MaxAge: an unused image not used for this long is removed whatever
	// the usage, once the collector has itself run that long; 0 never.
	MaxAge time.Duration
}

// GCResult says what one collection did.
type GCResult struct {
	Removed []string // image IDs
	Freed   uint64   // bytes of the images removed
	// Wanted is what usage over the high threshold asked to free, 0 if it
	// was under.
	Wanted uint64
	// Short: removing every image it could freed less than Wanted.
	Short bool
}

// candidate is an image that collection may remove, with what orders it.
type candidate struct {
	img      Image
	lastUsed time.Time
}

// GarbageCollect removes images the way the kubelet's image garbage collector
// does (realImageGCManager.GarbageCollect): first every unused image not used
// for MaxAge (once began, when the collector started, is MaxAge ago), then, if
// the store's filesystem is HighThresholdPercent full or more, unused images
// least recently used first, each imported MinAge ago or more, until usage is
// back to LowThresholdPercent. An image is unused when no reference of keep
// names it, no snapshot (container) is made of it, it is not pinned and no
// archive still in the import folder importDir gave it. Images in use have
// their last-used time set to now. Not freeing enough is an error saying how
// much was freed.
func (s *Store) GarbageCollect(p GCPolicy, keep []string, importDir string, began, now time.Time) (GCResult, error) {
	var res GCResult
	cands, err := s.candidates(keep, importDir, now)
	if err != nil {
		return res, err
	}
	var errs []error
	// freeOldImages
	if p.MaxAge > 0 && now.Sub(began) > p.MaxAge {
		cands = slices.DeleteFunc(cands, func(c candidate) bool {
			if now.Sub(c.lastUsed) <= p.MaxAge {
				return false
			}
			if err := s.removeImage(c.img.ID); err != nil {
				errs = append(errs, err)
				return false
			}
			res.Removed = append(res.Removed, c.img.ID)
			res.Freed += uint64(max(c.img.Size, 0))
			return true
		})
	}
	free, size, err := s.statfs(s.root)
	if err != nil {
		return res, errors.Join(append(errs, err)...)
	}
	if size == 0 {
		return res, errors.Join(append(errs, fmt.Errorf("invalid capacity 0 on the filesystem of %s", s.root))...)
	}
	free = min(free, size)
	usage := 100 - int(free*100/size)
	if usage < p.HighThresholdPercent {
		return res, errors.Join(errs...)
	}
	want := int64(size)*int64(100-p.LowThresholdPercent)/100 - int64(free)
	if want <= 0 {
		return res, errors.Join(errs...)
	}
	res.Wanted = uint64(want)
	// freeSpace
	var freed uint64
	for _, c := range cands {
		if freed >= res.Wanted {
			break
		}
		if now.Sub(c.img.Imported) < p.MinAge {
			continue
		}
		if err := s.removeImage(c.img.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		res.Removed = append(res.Removed, c.img.ID)
		freed += uint64(max(c.img.Size, 0))
	}
	res.Freed += freed
	if freed < res.Wanted {
		res.Short = true
		errs = append(errs, fmt.Errorf("%d%% of the filesystem of %s used (high threshold %d%%): freed %s of the %s wanted by removing unused images; the rest is used by images in use, pinned or too young, or by other files",
			usage, s.root, p.HighThresholdPercent, humanBytes(freed), humanBytes(res.Wanted)))
	}
	return res, errors.Join(errs...)
}

// RemoveUnused removes every unused image (see GarbageCollect), whatever its
// age: node-level reclaim under disk pressure (the kubelet's
// DeleteUnusedImages, which staticpodd does not hold back by
// imageMinimumGCAge, since an image a static pod is about to use is one a
// manifest names, which keep holds). An archive that stays in the import
// folder is the operator's wish that its images stay, and it would not be
// imported again. It returns the bytes of the images removed.
func (s *Store) RemoveUnused(keep []string, importDir string) (uint64, []string, error) {
	cands, err := s.candidates(keep, importDir, time.Now())
	if err != nil {
		return 0, nil, err
	}
	var freed uint64
	var removed []string
	var errs []error
	for _, c := range cands {
		if err := s.removeImage(c.img.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		freed += uint64(max(c.img.Size, 0))
		removed = append(removed, c.img.ID)
	}
	return freed, removed, errors.Join(errs...)
}

func (s *Store) removeImage(id string) error {
	if err := s.Remove(id); err != nil {
		return fmt.Errorf("remove unused image %s: %w", id, err)
	}
	return nil
}

// candidates are the unused images in eviction order, least recently used
// first, ties broken by import time (imagesInEvictionOrder,
// byLastUsedAndDetected). The images in use get now as their last use.
func (s *Store) candidates(keep []string, importDir string, now time.Time) ([]candidate, error) {
	idx, err := s.readIndex()
	if err != nil {
		return nil, err
	}
	kept := map[string]bool{} // by the import folder
	seen, err := s.readImportState()
	if err != nil {
		return nil, err
	}
	for name, rec := range seen {
		if _, err := os.Stat(filepath.Join(importDir, name)); err == nil {
			for _, id := range rec.Images {
				kept[id] = true
			}
		}
	}
	metas, err := s.snapshotMetas()
	if err != nil {
		return nil, err
	}
	inUse := map[string]bool{}
	for _, m := range metas {
		inUse[m.Image] = true
	}
	for _, ref := range keep {
		if i, err := find(idx, ref); err == nil {
			inUse[idx.Images[i].ID] = true
		}
	}
	var out []candidate
	for _, img := range idx.Images {
		if inUse[img.ID] {
			if err := s.touch(img.ID, now); err != nil {
				s.logger.Warn("cannot record the last use of an image", "image", img.ID, "err", err)
			}
		}
		if kept[img.ID] || inUse[img.ID] || img.Pinned {
			continue
		}
		out = append(out, candidate{img: img, lastUsed: s.LastUsed(img.ID)})
	}
	slices.SortStableFunc(out, func(a, b candidate) int {
		if c := a.lastUsed.Compare(b.lastUsed); c != 0 {
			return c
		}
		if c := a.img.Imported.Compare(b.img.Imported); c != 0 {
			return c
		}
		return strings.Compare(a.img.ID, b.img.ID)
	})
	return out, nil
}

func (s *Store) usedDir() string { return filepath.Join(s.root, "used") }

// usedPath is used/<hex>, whose content is the time the image was last used:
// a container made from it, or found in use by a collection.
func (s *Store) usedPath(id string) string { return filepath.Join(s.usedDir(), digestHex(id)) }

// touch records now as the last use of the image id, atomically: two
// writers leave one time or the other, a crash of the daemon the old one or
// the new. Not durably: it is written at every container's start, where
// its fsyncs were two waits on the disk before the container could run; a
// power cut may keep an older time, or for an image's first use an empty
// file, which LastUsed reads as never used. The time orders image GC's
// candidates and, with imageMaximumGCAge, removes those unused for longer;
// candidates exclude the images of containers (their snapshots' meta.json,
// whole on disk before the container runs; a power cut may lose its name,
// with the container) and of current manifests, and a collection sets the time of
// those to now. So a power cut can make an image used just before it and
// by no manifest after it look older, as the kubelet's own record does:
// it keeps the time in memory only, and an image never used since its
// start is, to its imageMaximumGCAge, as old as can be.
func (s *Store) touch(id string, now time.Time) error {
	if checkDigest(id) != nil {
		return fmt.Errorf("record use of image %q: not an image ID", id)
	}
	if err := os.MkdirAll(s.usedDir(), 0o700); err != nil {
		return fmt.Errorf("record use of image %s: %w", id, err)
	}
	if err := atomicfile.Replace(s.usedPath(id), []byte(now.UTC().Format(time.RFC3339Nano))); err != nil {
		return fmt.Errorf("record use of image %s: %w", id, err)
	}
	return nil
}

// LastUsed is when a container was last made from the image id or a
// collection last found it in use; the zero time if never (as the
// kubelet's image record of an image no container used).
func (s *Store) LastUsed(id string) time.Time {
	if checkDigest(id) != nil {
		return time.Time{}
	}
	b, err := os.ReadFile(s.usedPath(id))
	if err != nil {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(b)))
	if err != nil {
		return time.Time{}
	}
	return t
}

// forgetUse removes the last-use records of images idx no longer has.
func (s *Store) forgetUse(idx index) {
	entries, err := os.ReadDir(s.usedDir())
	if err != nil {
		return
	}
	have := map[string]bool{}
	for _, img := range idx.Images {
		have[digestHex(img.ID)] = true
	}
	for _, e := range entries {
		if have[e.Name()] || checkDigest("sha256:"+e.Name()) != nil {
			continue
		}
		if err := os.Remove(filepath.Join(s.usedDir(), e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			s.logger.Warn("cannot remove the last-use record of a removed image", "image", e.Name(), "err", err)
		}
	}
}

// Pin marks the image ref names as pinned, or unpins it: image garbage
// collection never removes a pinned image (the kubelet's CRI Image.pinned).
// `images rm` still does. It returns the image.
func (s *Store) Pin(ref string, pinned bool) (Image, error) {
	unlock, err := s.lock()
	if err != nil {
		return Image{}, err
	}
	defer unlock()
	idx, err := s.readIndex()
	if err != nil {
		return Image{}, err
	}
	i, err := find(idx, ref)
	if err != nil {
		return Image{}, fmt.Errorf("pin image: %w", err)
	}
	idx.Images[i].Pinned = pinned
	img := idx.Images[i]
	if err := s.writeIndexLocked(idx); err != nil {
		return Image{}, fmt.Errorf("pin image %s: %w", ref, err)
	}
	return img, nil
}
