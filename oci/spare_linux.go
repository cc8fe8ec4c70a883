//go:build linux && cgo

package oci

import (
	"context"
	"time"
)

// takeMonitor returns the spare monitor, or starts one for a new container ID
// if there is none: it starts up while the caller prepares the container.
func (r *Runtime) takeMonitor() (*pendingMonitor, error) {
	r.mu.Lock()
	pm := r.spare
	r.spare = nil
	r.mu.Unlock()
	if pm != nil && !pm.m.exited() {
		return pm, nil
	}
	if pm != nil {
		pm.kill()
	}
	return r.startMonitor(newID())
}

// refillSpare starts a spare monitor in the background unless there is one,
// so that the next container start finds its monitor already running. A
// spare's go pipe closes when the daemon exits, and the spare with it.
func (r *Runtime) refillSpare() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.spare != nil || r.refilling || r.closed {
		return
	}
	r.refilling = true
	retired := r.retired
	r.background.Add(1)
	go func() {
		defer r.background.Done()
		pm, err := r.startMonitor(newID())
		r.mu.Lock()
		r.refilling = false
		if err != nil {
			r.mu.Unlock()
			r.log.Warn("start spare monitor", "err", err)
			return
		}
		if r.retired != retired {
			r.mu.Unlock()
			pm.kill()
			return
		}
		r.spare = pm
		r.mu.Unlock()
	}()
}

// spareIdle is how long the spare monitor outlives the node's last sandbox:
// a pod made again soon (a manifest written back, the next run of a
// benchmark, a CRI client's RunPodSandbox) still finds it ready, and a node
// left with no pod (every manifest removed, or kubeadm reset, after which
// the daemon its CRI socket started keeps running) soon shows no monitor
// without a container.
const spareIdle = 5 * time.Second

// idleAfterRemoval retires the spare monitor spareIdle after the removal
// of the node's last sandbox, unless a sandbox exists by then.
func (r *Runtime) idleAfterRemoval(ctx context.Context) {
	if left, err := r.sb.Any(ctx); err != nil || left {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	if r.retireTimer != nil {
		r.retireTimer.Stop()
	}
	r.retireTimer = time.AfterFunc(r.spareIdleTime(), func() {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return
		}
		r.background.Add(1)
		r.mu.Unlock()
		defer r.background.Done()
		r.retireSpare(context.Background())
	})
}

// spareIdleTime is the runtime's: spareIdle, or the test's.
func (r *Runtime) spareIdleTime() time.Duration {
	if r.spareIdleForTest > 0 {
		return r.spareIdleForTest
	}
	return spareIdle
}

// retireSpare kills the spare monitor, and the one being started, when the
// node has no sandbox: no container will start before a pod is made again.
// The next start starts its own monitor, as the first start of a daemon
// does.
func (r *Runtime) retireSpare(ctx context.Context) {
	uids, err := r.sb.List(ctx)
	if err != nil || len(uids) > 0 {
		return
	}
	r.mu.Lock()
	pm := r.spare
	r.spare = nil
	r.retired++
	r.mu.Unlock()
	if pm != nil {
		pm.kill()
	}
}
