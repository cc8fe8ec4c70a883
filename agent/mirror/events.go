package mirror

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/staticpodd/staticpodd/agent/events"
)

// runEvents posts the agent's events, those kept from before too, through
// client-go's recorder: its correlator aggregates and spam-filters them as
// the kubelet's recorder does, its queue is bounded and drops when full, and
// it retries a failed post a bounded number of times. An event about a
// static pod names its mirror pod's UID when the mirror pod is known, so
// that kubectl describe shows it.
func (m *Mirror) runEvents(ctx context.Context, client kubernetes.Interface) {
	b := record.NewBroadcaster(record.WithContext(ctx), record.WithSleepDuration(5*time.Second))
	defer b.Shutdown()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	rec := b.NewRecorder(scheme.Scheme, v1.EventSource{Component: events.Component, Host: m.cfg.NodeName})

	kept, sub := m.pods.Events().Subscribe()
	defer func() { sub.Close() }()
	post := func(ev v1.Event) {
		ref := ev.InvolvedObject
		if ref.Kind == "Pod" {
			if uid := m.mirrorUID(ref.Namespace, ref.Name, string(ref.UID)); uid != "" {
				ref.UID = uid
			}
		}
		rec.Event(&ref, ev.Type, ev.Reason, ev.Message)
	}
	for _, ev := range kept {
		post(ev)
	}
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-sub.C():
			if !ok {
				// Fell too far behind: take up again from what is kept now.
				kept, sub = m.pods.Events().Subscribe()
				for _, ev := range kept[max(0, len(kept)-16):] {
					post(ev)
				}
				continue
			}
			post(ev)
		}
	}
}
