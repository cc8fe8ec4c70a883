//go:build linux && cgo

package oci

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// CreateSandbox makes the namespaces, files and cgroup pod's containers share
// (see package sandbox). It is a no-op for an existing sandbox.
func (r *Runtime) CreateSandbox(ctx context.Context, pod *podspec.Pod) error {
	if pod.FirstImage != "" {
		if !r.sb.Exists(pod.UID) {
			r.prepareAhead(pod.UID, pod.FirstImage)
		}
	}
	if err := r.sb.Create(ctx, pod); err != nil {
		r.dropAhead(pod.UID)
		return err
	}
	return nil
}

// RemoveSandbox unmounts and removes what CreateSandbox made, tolerating any
// part of it missing. The pod's containers must be destroyed first. The spare
// monitor is retired a while after the last sandbox's removal (see
// idleAfterRemoval).
func (r *Runtime) RemoveSandbox(ctx context.Context, podUID string) error {
	r.dropAhead(podUID)
	err := r.sb.Remove(ctx, podUID, func() error {
		// The pod's own records only: the status of another pod's container
		// is none of its business.
		if c, err := r.anyContainerOf(podUID); err != nil {
			return err
		} else if c != nil {
			return fmt.Errorf("container %s (%s) not destroyed", c.Name, c.ID)
		}
		return nil
	})
	if err != nil {
		return err
	}
	r.idleAfterRemoval(ctx)
	return nil
}

// anyContainerOf returns the record of a container of pod uid, or nil if it
// has none. A container whose pod is known (podOf) is read only if it is
// uid's: a node's removal of all its pods read every record for each, n² reads.
func (r *Runtime) anyContainerOf(uid string) (*containerRecord, error) {
	entries, err := os.ReadDir(filepath.Join(r.cfg.RunDir, containersDir))
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	r.prunePodOf(entries)
	for _, e := range entries {
		id := e.Name()
		if strings.HasSuffix(id, removingSuffix) {
			continue // removed
		}
		r.mu.Lock()
		pod, known := r.podOf[id]
		r.mu.Unlock()
		if known && pod != uid {
			continue
		}
		var rec containerRecord
		err := readJSON(filepath.Join(r.containerDir(id), containerFile), &rec)
		if errors.Is(err, fs.ErrNotExist) {
			continue // being created or removed
		}
		if err != nil {
			return nil, err
		}
		r.notePod(id, rec.PodUID)
		if rec.PodUID == uid {
			return &rec, nil
		}
	}
	return nil, nil
}

// notePod remembers that container id is pod uid's.
func (r *Runtime) notePod(id, uid string) {
	r.mu.Lock()
	if r.podOf == nil {
		r.podOf = map[string]string{}
	}
	r.podOf[id] = uid
	r.mu.Unlock()
}

// prunePodOf forgets the containers no longer listed in entries (removed
// by another way than Destroy: a start that failed, a removal cut short),
// once podOf has grown well past them.
func (r *Runtime) prunePodOf(entries []os.DirEntry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.podOf) <= 2*len(entries)+64 {
		return
	}
	listed := make(map[string]bool, len(entries))
	for _, e := range entries {
		listed[e.Name()] = true
	}
	for id := range r.podOf {
		if !listed[id] {
			delete(r.podOf, id)
		}
	}
}

// ListSandboxes returns the UIDs of the pods that have a sandbox.
func (r *Runtime) ListSandboxes(ctx context.Context) ([]string, error) {
	return r.sb.List(ctx)
}

// SandboxStatus tells pod uid's addresses on the pod network, or why it has
// none; a sandbox adopted from an earlier daemon whose network failed CNI's
// CHECK (run once in the background, see checkNetworks) says so in Message.
func (r *Runtime) SandboxStatus(ctx context.Context, uid string) (podspec.SandboxStatus, error) {
	return r.sb.Status(ctx, uid)
}

// checkNetworks runs CNI's CHECK once on the network of every sandbox an
// earlier daemon made (see sandbox.Manager.CheckNetworks), and closes
// r.checked when done.
func (r *Runtime) checkNetworks(ctx context.Context, uids []string) {
	defer close(r.checked)
	r.sb.CheckNetworks(ctx, uids)
}

// Dial connects to addr from inside the network namespace of pod podUID, the
// host's for a hostNetwork pod, so a probe reaches what a container listens
// on without anything published on the host or installed in the image (see
// sandbox.Manager.Dial).
func (r *Runtime) Dial(ctx context.Context, podUID, network, addr string) (net.Conn, error) {
	return r.sb.Dial(ctx, podUID, network, addr)
}
