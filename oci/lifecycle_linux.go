//go:build linux && cgo

package oci

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
)

// Recover makes the state directory and cleans up what an earlier daemon
// left: interrupted starts, removals and sandbox creations, the exec
// processes and debug containers it ran. The containers themselves and their monitors are
// adopted as they are asked for. When ctx ends, Recover stops where it is
// and returns ctx's cause; what is left is cleaned up by the next Recover.
// (The kubelet's runtime state is containerd's, which cleans up as it
// starts: containerd's cri plugin recover.)
func (r *Runtime) Recover(ctx context.Context) error {
	if ctx.Err() != nil {
		return fmt.Errorf("recover runtime state: %w", context.Cause(ctx))
	}
	for _, d := range []string{r.libcontainerRoot(), filepath.Join(r.cfg.RunDir, podsDir), filepath.Join(r.cfg.RunDir, containersDir)} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("recover runtime state: %w", err)
		}
	}
	path, f, err := openMonitorExecutable(r.cfg.RunDir, monitorBinary)
	if err != nil {
		r.log.Warn("monitors run as this binary, each start re-executing all of it", "err", err)
	}
	r.mu.Lock()
	r.monitorPath, r.monitorFile = path, f
	r.mu.Unlock()
	if err := r.removeDebugLeftovers(ctx); err != nil {
		return fmt.Errorf("recover runtime state: %w", err)
	}
	if err := r.removeOrphans(ctx); err != nil {
		return fmt.Errorf("recover runtime state: %w", err)
	}
	if err := r.killLeftoverExecs(ctx); err != nil {
		return fmt.Errorf("recover runtime state: %w", err)
	}
	return nil
}

// Start starts what runs beside the pods until ctx ends or Close is called:
// CNI's CHECK of the networks of the sandboxes an earlier daemon made. It is
// called once, after Recover.
func (r *Runtime) Start(ctx context.Context) {
	uids, err := r.ListSandboxes(ctx)
	if err != nil || r.net == nil || len(uids) == 0 {
		close(r.checked)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		close(r.checked)
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	r.stopBackground = cancel
	r.background.Add(1)
	go func() {
		defer r.background.Done()
		r.checkNetworks(ctx, uids)
	}()
}

// Close stops and waits for every goroutine the Runtime runs on its own
// (the network check, the spare monitor's start, the cgroup warm-up, what
// is prepared beside a sandbox), kills the spare monitor, which has no
// container yet, drops what was prepared beside a sandbox and not taken
// (its monitor killed, its snapshot released), ends and removes the debug
// containers, which live only as long as their requests, and closes the
// monitor program. Containers and their monitors keep running: they outlive the
// daemon, and the next one adopts them. No other method may be called after
// Close.
func (r *Runtime) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	stop := r.stopBackground
	if r.retireTimer != nil {
		r.retireTimer.Stop()
	}
	r.mu.Unlock()
	if stop != nil {
		stop()
	}
	r.background.Wait() // no Add after closed is set
	r.mu.Lock()
	var uids []string
	for uid := range r.aheads {
		uids = append(uids, uid)
	}
	r.mu.Unlock()
	for _, uid := range uids {
		r.dropAhead(uid)
	}
	r.stopDebugs()
	r.warmer.wait()
	r.mu.Lock()
	spare, f, execs := r.spare, r.monitorFile, r.execs
	r.spare, r.monitorFile = nil, nil
	r.mu.Unlock()
	if execs != nil {
		execs.Close()
	}
	if spare != nil {
		spare.kill()
	}
	if f != nil {
		return f.Close()
	}
	return nil
}
