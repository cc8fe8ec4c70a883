//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/oci/stats"
)

// NodeStats measures the node alone: what the eviction manager reads at
// each housekeeping, where reading every pod's and container's cgroup files,
// records and network counters was most of an idle daemon's CPU (0.4% of a
// core with 100 pods).
func (r *Runtime) NodeStats(context.Context) (podspec.NodeStats, error) { return r.nodeStats() }

func (r *Runtime) nodeStats() (podspec.NodeStats, error) {
	return stats.Node(stats.NodeConfig{
		RootDir:    r.cfg.RootDir,
		PodsCgroup: rootFSPath(r.cfg.CgroupDriver, r.cfg.CgroupRoot),
		NodeCgroup: r.cfg.NodeCgroup,
	})
}

// Stats measures the node and every pod that has a sandbox, with its
// containers. A pod or container that goes meanwhile is left out.
func (r *Runtime) Stats(ctx context.Context) (*podspec.Summary, error) {
	var errs []error
	node, err := r.nodeStats()
	if err != nil {
		errs = append(errs, err)
	}
	sum := &podspec.Summary{Node: node}

	recs, err := r.containerRecords()
	if err != nil {
		errs = append(errs, err)
	}
	live := map[string]bool{}
	for _, rec := range recs {
		live[rec.ID] = true
	}
	r.layers.Forget(live)
	uids, err := r.ListSandboxes(ctx)
	if err != nil {
		errs = append(errs, err)
	}
	for _, uid := range uids {
		pr, err := r.sb.Record(uid)
		if err != nil {
			continue // being made or removed
		}
		ps := podspec.PodStats{UID: uid, Namespace: pr.Namespace, Name: pr.Name}
		if ps.Network, err = r.podNetDev(uid); err != nil && !errors.Is(err, podspec.ErrNotExist) && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("network stats of pod %s: %w", pr.Name, err))
		}
		if ps.Usage, err = stats.ReadUsage(stats.DirsOf(cgroupFSPath(pr.CgroupsPath))); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("stats of pod %s: %w", pr.Name, err))
		}
		for _, rec := range recs {
			if rec.PodUID != uid {
				continue
			}
			cs := podspec.ContainerStats{ID: rec.ID, Name: rec.Name}
			if cs.Usage, err = stats.ReadUsage(stats.DirsOf(cgroupFSPath(containerCgroupsPath(pr.CgroupsPath, rec.ID)))); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, fmt.Errorf("stats of container %s: %w", rec.ID, err))
			}
			cs.RootfsBytes = r.writableBytes(rec.ID, node.Time)
			cs.LogsBytes = stats.LogBytes(rec.LogPath)
			ps.Containers = append(ps.Containers, cs)
		}
		sum.Pods = append(sum.Pods, ps)
	}
	return sum, errors.Join(errs...)
}

// containerRecords reads the record of every container there is.
func (r *Runtime) containerRecords() ([]containerRecord, error) {
	entries, err := os.ReadDir(filepath.Join(r.cfg.RunDir, containersDir))
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var out []containerRecord
	for _, e := range entries {
		var rec containerRecord
		if readJSON(filepath.Join(r.containerDir(e.Name()), containerFile), &rec) == nil {
			out = append(out, rec)
		}
	}
	return out, nil
}

// writableBytes is the size of container id's writable layer, measured at
// most a while before now (see stats.Layers); 0 with an image store that
// cannot measure it.
func (r *Runtime) writableBytes(id string, now time.Time) uint64 {
	ws, ok := r.cfg.Images.(stats.LayerMeasurer)
	if !ok {
		return 0
	}
	return r.layers.WritableBytes(ws, id, now)
}

// podNetDev is the interfaces of pod uid's network namespace, read from a
// thread moved into it for the read, as Dial makes its sockets.
func (r *Runtime) podNetDev(uid string) (ifs []podspec.InterfaceStats, err error) {
	err = r.sb.InNetwork(uid, func() (err error) {
		ifs, err = stats.ThreadNetDev()
		return err
	})
	return ifs, err
}
