package image

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// RemoveUnused removes every image that no reference in keep names (by
// reference or ID), that no snapshot (container) is made of, and that no archive still
// in the import folder importDir gave: node-level reclaim under disk pressure
// (the kubelet's image garbage collection, DeleteUnusedImages). An archive
// that stays in the folder is the operator's wish that its images stay, and
// it would not be imported again. It returns the bytes of the images removed.
func (s *Store) RemoveUnused(keep []string, importDir string) (uint64, []string, error) {
	imgs, err := s.List()
	if err != nil {
		return 0, nil, err
	}
	kept := map[string]bool{}
	for _, ref := range keep {
		if img, err := s.Get(ref); err == nil {
			kept[img.ID] = true
		}
	}
	seen, err := s.readImportState()
	if err != nil {
		return 0, nil, err
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
		return 0, nil, err
	}
	for _, m := range metas {
		kept[m.Image] = true
	}
	var freed uint64
	var removed []string
	var errs []error
	for _, img := range imgs {
		if kept[img.ID] {
			continue
		}
		if err := s.Remove(img.ID); err != nil {
			errs = append(errs, fmt.Errorf("remove unused image %s: %w", img.ID, err))
			continue
		}
		freed += uint64(max(img.Size, 0))
		removed = append(removed, img.ID)
	}
	return freed, removed, errors.Join(errs...)
}
