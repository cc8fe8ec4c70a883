package mirror

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/tools/record/util"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// runEvents posts the agent's events, those kept from before too, as
// agent/events made them: that package is the one correlator (a repeat counts
// on the event made first, similar events become one combined event, as
// client-go's EventCorrelator does), and the API server gets its result. This
// side only delivers, as client-go's broadcaster does after its correlator:
// client-go's spam filter, a bounded queue that drops when full, and a bounded
// number of retries of a failed post (eventWriter). An event about a static
// pod names its mirror pod's UID, waiting up to holdEvents for the mirror pod,
// so that kubectl describe shows it.
func (m *Mirror) runEvents(ctx context.Context, client api) {
	queue := make(chan v1.Event, maxQueuedEvents)
	w := newEventWriter(client.EventSink(ctx), 5*time.Second)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { w.run(ctx, queue) })

	kept, sub := m.pods.Events().Subscribe()
	defer func() { sub.Close() }()
	// An event about a pod waits, a while, for the pod's mirror pod: a
	// container's first events come before its mirror pod is made.
	type held struct {
		ev    v1.Event
		since time.Time
	}
	var pending []held
	post := func(ev v1.Event, ref v1.ObjectReference) {
		ev.InvolvedObject = ref
		select {
		case queue <- ev:
		default: // full: dropped, as the broadcaster drops
		}
	}
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
		case ev := <-m.apiPodEvents:
			post(ev, ev.InvolvedObject)
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

// What client-go's broadcaster and its spam filter hold to (tools/record):
// how many events wait to be posted, how often one is tried, and how many
// events about one object and of one type go through at once (spamBurst)
// and then how fast (spamQPS: one each five minutes).
const (
	maxQueuedEvents  = 1000
	maxTriesPerEvent = 12
	spamCacheSize    = 4096
	spamBurst        = 25
	spamQPS          = 1. / 300.
)

// eventWriter posts events to the API server as they come, correlated
// already: an event counted once creates it, a repeat (Count > 1) patches its
// count, last timestamp and message, as client-go's recordToSink does with
// what its correlator returns.
type eventWriter struct {
	sink  record.EventSink
	spam  *record.EventSourceObjectSpamFilter
	sleep time.Duration // between tries; the first sleep is a random part of it
}

func newEventWriter(sink record.EventSink, sleep time.Duration) *eventWriter {
	return &eventWriter{
		sink:  sink,
		spam:  record.NewEventSourceObjectSpamFilter(spamCacheSize, spamBurst, spamQPS, clock.RealClock{}, spamKey),
		sleep: sleep,
	}
}

// spamKey is client-go's getSpamKey (its spam filter's default, which
// tools/record does not export): source and object, and the type.
func spamKey(ev *v1.Event) string {
	o := ev.InvolvedObject
	return strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID),
		o.APIVersion, ev.Type}, "")
}

func (w *eventWriter) run(ctx context.Context, queue <-chan v1.Event) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev := <-queue:
			w.write(ctx, &ev)
		}
	}
}

// write posts ev unless the spam filter holds it back, trying again after a
// failure that a later try may not meet (client-go's recordToSink).
func (w *eventWriter) write(ctx context.Context, ev *v1.Event) {
	if w.spam.Filter(ev) {
		return
	}
	logger := klog.FromContext(ctx)
	for tries := 1; ; tries++ {
		if w.post(logger, ev) {
			return
		}
		if tries >= maxTriesPerEvent {
			logger.Error(nil, "Unable to write event (retry limit exceeded!)", "event", ev)
			return
		}
		// Random at first, so that many clients do not come back as one
		// when the API server does.
		delay := w.sleep
		if tries == 1 {
			delay = time.Duration(float64(delay) * rand.Float64())
		}
		select {
		case <-ctx.Done():
			logger.Error(nil, "Unable to write event (broadcaster is shut down)", "event", ev)
			return
		case <-time.After(delay):
		}
	}
}

// post creates ev, or for a repeat patches it (creating it when it is not
// there: never posted, or removed meanwhile). It returns false when another
// try may succeed (client-go's recordEvent).
func (w *eventWriter) post(logger klog.Logger, ev *v1.Event) bool {
	var err error
	update := ev.Count > 1
	if update {
		var patch []byte
		if patch, err = countPatch(ev); err == nil {
			_, err = w.sink.Patch(ev, patch)
		}
	}
	if !update || util.IsKeyNotFoundError(err) {
		created := *ev
		created.ResourceVersion = "" // the agent's own: the API server makes one
		_, err = w.sink.Create(&created)
	}
	if err == nil {
		return true
	}
	switch err.(type) {
	case *rest.RequestConstructionError:
		logger.Error(err, "Unable to construct event (will not retry!)", "event", ev)
		return true
	case *apierrors.StatusError:
		if apierrors.IsAlreadyExists(err) || apierrors.HasStatusCause(err, v1.NamespaceTerminatingCause) {
			logger.V(5).Info("Server rejected event (will not retry!)", "event", ev, "err", err)
		} else {
			logger.Error(err, "Server rejected event (will not retry!)", "event", ev)
		}
		return true
	}
	logger.Error(err, "Unable to write event (may retry after sleeping)", "event", ev)
	return false
}

// countPatch is the strategic merge patch that brings the event as first
// posted to ev: its count, last timestamp and message (client-go's
// eventObserve makes the same).
func countPatch(ev *v1.Event) ([]byte, error) {
	cur := *ev
	cur.ResourceVersion = ""
	old := cur
	old.Count = 0
	old.LastTimestamp = metav1.NewTime(time.Unix(0, 0))
	old.Message = ""
	newData, err := json.Marshal(&cur)
	if err != nil {
		return nil, err
	}
	oldData, err := json.Marshal(&old)
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(oldData, newData, &cur)
}
