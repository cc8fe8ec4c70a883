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
// has none.
func (r *Runtime) anyContainerOf(uid string) (*containerRecord, error) {
	entries, err := os.ReadDir(filepath.Join(r.cfg.RunDir, containersDir))
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), removingSuffix) {
			continue // removed
		}
		var rec containerRecord
		err := readJSON(filepath.Join(r.containerDir(e.Name()), containerFile), &rec)
		if errors.Is(err, fs.ErrNotExist) {
			continue // being created or removed
		}
		if err != nil {
			return nil, err
		}
		if rec.PodUID == uid {
			return &rec, nil
		}
	}
	return nil, nil
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
