//go:build linux && cgo

package oci

import (
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/oci/image"
)

// ahead is the monitor and image snapshot of a pod's first container,
// prepared while its sandbox is made (podspec.Pod.FirstImage): the
// snapshot (directories, meta.json, the overlay mount; about a millisecond
// of a start) does not need the sandbox, and the monitor's ID, the
// container's and the snapshot's key, is known before the container is
// asked for. StartContainer takes it for a container of that image ID;
// a container of another image, an image the store lacks at the start, a
// failed or removed sandbox and Close drop it (dropAhead): its monitor
// killed, its snapshot released. A pod that waits between its sandbox and
// its first start (its volumes, its image's pull) keeps it meanwhile: one
// idle monitor and one mounted snapshot at most a pod. A daemon that dies
// meanwhile leaves a snapshot without a container, which the next one
// removes (removeOrphans), and a monitor whose go pipe closes.
type ahead struct {
	pm   *pendingMonitor // nil if none could be started
	ref  string          // what was prepared: FirstImage
	done chan struct{}   // closed once pm and img, or err, are set
	img  image.Image
	err  error
}

// prepareAhead begins the ahead of pod uid's first container, of image ref,
// unless one is under way.
func (r *Runtime) prepareAhead(uid, ref string) {
	a := &ahead{ref: ref, done: make(chan struct{})}
	r.mu.Lock()
	if r.closed || r.aheads[uid] != nil {
		r.mu.Unlock()
		return
	}
	if r.aheads == nil {
		r.aheads = map[string]*ahead{}
	}
	r.aheads[uid] = a
	r.background.Add(1)
	r.mu.Unlock()
	go func() {
		defer r.background.Done()
		defer close(a.done)
		pm, err := r.takeMonitor()
		if err != nil {
			a.err = err
			return
		}
		a.pm = pm
		if _, a.img, a.err = r.cfg.Images.Prepare(pm.id, ref); a.err != nil {
			// An image to pull first, or one refused: the start
			// prepares it itself, and says why.
			r.discardAhead(a)
		}
	}()
}

// takeAhead removes and returns pod uid's ahead, once it is done; nil if
// there is none.
func (r *Runtime) takeAhead(uid string) *ahead {
	r.mu.Lock()
	a := r.aheads[uid]
	delete(r.aheads, uid)
	r.mu.Unlock()
	if a != nil {
		<-a.done
	}
	return a
}

// claimAhead returns the monitor pod's ahead prepared for container c, if it
// prepared c's image, and drops it otherwise.
func (r *Runtime) claimAhead(pod *podspec.Pod, c *podspec.Container, id string) *pendingMonitor {
	a := r.takeAhead(pod.UID)
	if a == nil || a.err != nil {
		return nil
	}
	if id == a.img.ID && !a.pm.m.exited() {
		return a.pm
	}
	r.log.Debug("prepared monitor and snapshot not for this container; dropped", "pod", pod.Name, "container", c.Name, "prepared", a.ref)
	r.discardAhead(a)
	return nil
}

// dropAhead drops pod uid's ahead, if any: a sandbox that failed or is
// removed.
func (r *Runtime) dropAhead(uid string) {
	if a := r.takeAhead(uid); a != nil && a.err == nil {
		r.discardAhead(a)
	}
}

// discardAhead kills a's monitor and releases its snapshot.
func (r *Runtime) discardAhead(a *ahead) {
	if a.pm == nil {
		return
	}
	a.pm.kill()
	r.cleanup(a.pm.id)
}
