package agent

import (
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
)

// activeDeadline is when pod will have been active for its
// activeDeadlineSeconds, counted from its status.startTime (the kubelet's
// pastActiveDeadline); zero if it has none.
func (w *worker) activeDeadline(pod *v1.Pod) time.Time {
	s := pod.Spec.ActiveDeadlineSeconds
	if s == nil || w.gen == nil || w.gen.uid != string(pod.UID) || w.gen.startTime.IsZero() {
		return time.Time{}
	}
	return w.gen.startTime.Add(time.Duration(*s) * time.Second)
}

// checkDeadline makes the generation of d terminating once its pod is past
// its active deadline (it fails, DeadlineExceeded), and returns when that
// will be if it is not yet (zero: never, or already).
func (w *worker) checkDeadline(d *desiredPod) time.Time {
	dl := w.activeDeadline(d.pod)
	switch {
	case dl.IsZero():
		return time.Time{}
	case time.Now().Before(dl):
		return dl
	}
	if w.gen.terminate(&stopRequest{reason: reasonDeadlineExceeded, message: messageDeadlineExceeded}, time.Now()) {
		w.logger.Info("pod active longer than its activeDeadlineSeconds, stopping it for good",
			"reason", reasonDeadlineExceeded, "activeDeadlineSeconds", *d.pod.Spec.ActiveDeadlineSeconds,
			"startTime", w.gen.startTime)
		// The kubelet's activeDeadlineHandler.ShouldEvict.
		w.a.events.Eventf(events.PodRef(d.pod), v1.EventTypeNormal, reasonDeadlineExceeded, "%s", messageDeadlineExceeded)
	}
	return time.Time{}
}
