//go:build linux && cgo

package oci

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
	r.background.Add(1)
	go func() {
		defer r.background.Done()
		pm, err := r.startMonitor(newID())
		r.mu.Lock()
		defer r.mu.Unlock()
		r.refilling = false
		if err != nil {
			r.log.Warn("start spare monitor", "err", err)
			return
		}
		r.spare = pm
	}()
}
