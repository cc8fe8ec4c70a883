//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
)

// removeOrphans removes what belongs to no container: the state dir of a
// start whose daemon died before it wrote the container's record (its
// monitor was never told to go), libcontainer state and image snapshots
// without a state dir. Failures are logged; the next daemon tries again.
// When ctx ends it stops and returns ctx's cause.
func (r *Runtime) removeOrphans(ctx context.Context) error {
	entries, err := os.ReadDir(filepath.Join(r.cfg.RunDir, containersDir))
	if err != nil {
		r.log.Warn("list containers for orphans", "err", err)
		return nil
	}
	containers := map[string]bool{}
	var orphans []string
	for _, e := range entries {
		_, err := os.Stat(filepath.Join(r.containerDir(e.Name()), containerFile))
		if errors.Is(err, fs.ErrNotExist) {
			orphans = append(orphans, e.Name())
		}
		containers[e.Name()] = true
	}
	var ids []string
	if entries, err := os.ReadDir(r.libcontainerRoot()); err == nil {
		for _, e := range entries {
			ids = append(ids, e.Name())
		}
	} else {
		r.log.Warn("list libcontainer state for orphans", "err", err)
	}
	if keys, err := r.cfg.Images.Snapshots(); err == nil {
		ids = append(ids, keys...)
	} else {
		r.log.Warn("list image snapshots for orphans", "err", err)
	}
	for _, id := range ids {
		if !containers[id] {
			containers[id] = true
			orphans = append(orphans, id)
		}
	}
	for _, id := range orphans {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		r.log.Info("remove what an interrupted start or removal left", "id", id)
		if err := r.remove(id); err != nil {
			r.log.Warn("remove orphaned container", "id", id, "err", err)
		}
	}
	return r.sb.RemovePartial(ctx)
}
