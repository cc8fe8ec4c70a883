package mirror

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/staticpodd/staticpodd/agent/events"
)

// runEvents posts the agent's events, those kept from before too, through
// client-go's recorder: its correlator aggregates and spam-filters them as
// the kubelet's recorder does, its queue is bounded and drops when full, and
// it retries a failed post a bounded number of times. An event about a
// static pod names its mirror pod's UID, waiting up to holdEvents for the
// mirror pod, so that kubectl describe shows it.
func (m *Mirror) runEvents(ctx context.Context, client api) {
	b := record.NewBroadcaster(record.WithContext(ctx), record.WithSleepDuration(5*time.Second))
	defer b.Shutdown()
	b.StartRecordingToSink(client.EventSink())
	rec := b.NewRecorder(clientScheme(), v1.EventSource{Component: events.Component, Host: m.cfg.NodeName})

	kept, sub := m.pods.Events().Subscribe()
	defer func() { sub.Close() }()
	// An event about a pod waits, a while, for the pod's mirror pod: a
	// container's first events come before its mirror pod is made.
	type held struct {
		ev    v1.Event
		since time.Time
	}
	var pending []held
	post := func(ev v1.Event, ref v1.ObjectReference) { rec.Event(&ref, ev.Type, ev.Reason, ev.Message) }
	offer := func(ev v1.Event) {
		ref := ev.InvolvedObject
		if ref.Kind != "Pod" {
			post(ev, ref)
			return
		}
		if uid := m.mirrorUID(ref.Namespace, ref.Name, string(ref.UID)); uid != "" {
			ref.UID = uid
			post(ev, ref)
			return
		}
		if len(pending) >= maxHeldEvents {
			post(pending[0].ev, pending[0].ev.InvolvedObject)
			pending = pending[1:]
		}
		pending = append(pending, held{ev: ev, since: time.Now()})
	}
	for _, ev := range kept {
		offer(ev)
	}
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			kept := pending[:0]
			for _, h := range pending {
				ref := h.ev.InvolvedObject
				if uid := m.mirrorUID(ref.Namespace, ref.Name, string(ref.UID)); uid != "" {
					ref.UID = uid
					post(h.ev, ref)
				} else if time.Since(h.since) > holdEvents {
					post(h.ev, ref) // no mirror pod: as the kubelet names it
				} else {
					kept = append(kept, h)
				}
			}
			pending = kept
		case ev, ok := <-sub.C():
			if !ok {
				// Fell too far behind: take up again from what is kept now.
				kept, sub = m.pods.Events().Subscribe()
				for _, ev := range kept[max(0, len(kept)-16):] {
					offer(ev)
				}
				continue
			}
			offer(ev)
		}
	}
}

// How long, and how many, events about pods wait for their mirror pod.
const (
	holdEvents    = 10 * time.Second
	maxHeldEvents = 256
)
