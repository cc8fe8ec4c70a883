// Package events records what happens to pods as Kubernetes events: v1.Event
// values with the kubelet's reasons and messages, aggregated as the kubelet's
// recorder aggregates them (client-go tools/record), logged, kept in a bounded
// ring in memory and published to subscribers.
//
// It is the daemon's one event correlator: what `staticpodd events` shows is
// what agent/mirror posts to the API server, counts and combined events alike;
// the mirror adds only delivery (client-go's spam filter, queue and retries).
// The aggregation and counting are client-go's EventCorrelator's, written out
// here because tools/record links client-go's REST client, which only
// agent/mirror may (tests/deps_test.go).
package events

import (
	"container/list"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

// FailedToRetrieveImagePullSecret is the kubelet's event when a pull failed
// and some of the pod's imagePullSecrets were not found.
const FailedToRetrieveImagePullSecret = "FailedToRetrieveImagePullSecret"

// Reasons, as the kubelet's pkg/kubelet/events names them.
const (
	Created             = "Created"
	Started             = "Started"
	Failed              = "Failed"
	Killing             = "Killing"
	BackOff             = "BackOff"
	Pulled              = "Pulled"
	Pulling             = "Pulling"
	ErrImageNeverPull   = "ErrImageNeverPull"
	Unhealthy           = "Unhealthy"
	FailedPostStartHook = "FailedPostStartHook"
	FailedPreStopHook   = "FailedPreStopHook"
	FailedValidation    = "FailedValidation"
	FailedMount         = "FailedMount" // a volume could not be set up: a ConfigMap or Secret is missing
	FailedFetch         = "FailedFetch" // staticpodd's own: a manifest URL's request failed
	// ManifestWarning is staticpodd's own: a manifest is used, but not all of
	// it (an unknown field such as a misspelt comand: is ignored).
	ManifestWarning     = "ManifestWarning"
	Starting            = "Starting"
	FreeDiskSpaceFailed = "FreeDiskSpaceFailed" // image GC freed less than the low threshold wants
	ImageGCFailed       = "ImageGCFailed"
	DNSConfigForming    = "DNSConfigForming"
	NodeNotSchedulable  = "NodeNotSchedulable"
	// StaticPodsOnly is staticpodd's own, as the kubelet's admission
	// failures (OutOfcpu, NodeAffinity) name theirs: a pod the API server
	// bound to the node, failed, since staticpodd runs only static pods.
	StaticPodsOnly = "StaticPodsOnly"
	// NetworkAttached and NetworkConfigChanged are staticpodd's own, as
	// the kubelet leaves the pod network to its runtime: which CNI network
	// and plugins a pod got, and that a pod made now would get another.
	NetworkAttached      = "NetworkAttached"
	NetworkConfigChanged = "NetworkConfigChanged"
	// WaitingForDependency is staticpodd's own: a pod waits for the static
	// pods its start-after annotation names to be Ready before it starts.
	WaitingForDependency = "WaitingForDependency"
	// StoppingAfterDependents is staticpodd's own: a pod removed with the
	// pods that start after it, or with pods of a lower priority, waits
	// for them to stop first, at most its grace period.
	StoppingAfterDependents = "StoppingAfterDependents"
	// RolledBack is staticpodd's own: a new generation of a pod was not
	// Ready within its staticpodd.io/rollback-after, or the operator ran
	// `rollout undo`, and an earlier generation runs instead (or could not).
	RolledBack = "RolledBack"
	// BundleReady is staticpodd's own: the signed bundle on trial was
	// Ready in time (or applied without a rollback-after), and the bundle
	// it replaced is released.
	BundleReady = "BundleReady"
)

// Component is the events' source and reporting controller.
const Component = "staticpodd"

// DefaultCapacity is how many events the ring keeps.
const DefaultCapacity = 1000

// Aggregation, as client-go's EventCorrelator does it: more than
// aggregateMaxEvents events about one object that differ only by message
// within aggregateInterval become one event "(combined from similar events):
// <latest message>" whose count grows.
const (
	aggregateMaxEvents = 10
	aggregateInterval  = 10 * time.Minute
	aggregatePrefix    = "(combined from similar events): "
	// maxAggregates bounds the records of similar events (client-go's LRU
	// holds 4096).
	maxAggregates = 4096
)

// subscriberBuffer is how many events a subscriber may fall behind before it
// is dropped; the recorder never waits for a subscriber.
const subscriberBuffer = 256

// Recorder keeps the newest events. It is safe for concurrent use.
type Recorder struct {
	logger   *slog.Logger
	host     string
	capacity int

	mu         sync.Mutex                 // guards the fields below
	ring       *list.List                 // *v1.Event, least recently changed first
	byKey      map[string]*list.Element   // by dedup key (client-go getEventKey)
	keyOf      map[*v1.Event]string       // the dedup key of each event in the ring
	aggregates map[string]*aggregateState // by aggregate key
	subs       map[*Subscription]struct{}
	version    uint64 // resourceVersion of the last change
}

type aggregateState struct {
	messages map[string]bool
	last     time.Time
}

// New returns a recorder for node host that keeps capacity events
// (DefaultCapacity if capacity <= 0) and logs each one to logger.
func New(host string, capacity int, logger *slog.Logger) *Recorder {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	return &Recorder{
		logger:     logger,
		host:       host,
		capacity:   capacity,
		ring:       list.New(),
		byKey:      map[string]*list.Element{},
		keyOf:      map[*v1.Event]string{},
		aggregates: map[string]*aggregateState{},
		subs:       map[*Subscription]struct{}{},
	}
}

// PodRef refers to a pod as the kubelet's events do.
func PodRef(pod *v1.Pod) v1.ObjectReference {
	return v1.ObjectReference{
		Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID,
		ResourceVersion: pod.ResourceVersion,
	}
}

// ContainerRef refers to one container of pod, by the field path the
// kubelet's GenerateContainerRef gives: spec.containers{name} or
// spec.initContainers{name}.
func ContainerRef(pod *v1.Pod, name string) v1.ObjectReference {
	ref := PodRef(pod)
	ref.FieldPath = "spec.containers{" + name + "}"
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			ref.FieldPath = "spec.initContainers{" + name + "}"
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if c.Name == name {
			ref.FieldPath = "spec.ephemeralContainers{" + name + "}"
		}
	}
	return ref
}

// NodeRef refers to the node, as the kubelet's nodeRef (its UID is the name).
func NodeRef(node string) v1.ObjectReference {
	return v1.ObjectReference{Kind: "Node", Name: node, UID: types.UID(node)}
}

// Container is the container name of a field path spec.containers{name},
// spec.initContainers{name} or spec.ephemeralContainers{name}; "" for
// anything else.
func Container(fieldPath string) string {
	for _, p := range []string{"spec.containers{", "spec.initContainers{", "spec.ephemeralContainers{"} {
		if rest, ok := strings.CutPrefix(fieldPath, p); ok {
			return strings.TrimSuffix(rest, "}")
		}
	}
	return ""
}

// Eventf records an event about ref: eventType is v1.EventTypeNormal or
// v1.EventTypeWarning, reason one of the constants above. The message is cut
// to podspec.MaxEventMessage, here for every event: it often quotes what a
// container, a registry or a plugin said.
func (r *Recorder) Eventf(ref v1.ObjectReference, eventType, reason, format string, args ...any) {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	r.record(ref, eventType, reason, msg)
}

// Make is an event of node host about ref, seen once now, as a Recorder
// makes it (client-go's makeEvent); the message is cut as Eventf cuts it.
// The mirror posts such events about the API server's pods it fails without
// keeping them: a flood of those must not push the static pods' events out
// of the ring.
func Make(host string, ref v1.ObjectReference, eventType, reason, msg string) *v1.Event {
	now := metav1.NewTime(time.Now())
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault // client-go's makeEvent, for cluster-scoped objects
	}
	return &v1.Event{
		TypeMeta:            metav1.TypeMeta{APIVersion: "v1", Kind: "Event"},
		ObjectMeta:          metav1.ObjectMeta{Name: fmt.Sprintf("%v.%x", ref.Name, now.UnixNano()), Namespace: ns},
		InvolvedObject:      ref,
		Reason:              reason,
		Message:             podspec.Truncate(msg, podspec.MaxEventMessage),
		Source:              v1.EventSource{Component: Component, Host: host},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		Type:                eventType,
		ReportingController: Component,
		ReportingInstance:   host,
	}
}

func (r *Recorder) record(ref v1.ObjectReference, eventType, reason, msg string) {
	ev := Make(r.host, ref, eventType, reason, msg)
	now := ev.FirstTimestamp

	r.mu.Lock()
	key := r.aggregateLocked(ev, now.Time)
	if el, ok := r.byKey[key]; ok {
		// A repeat: the same event, counted (client-go's eventObserve).
		old := el.Value.(*v1.Event)
		ev.Name, ev.FirstTimestamp, ev.Count = old.Name, old.FirstTimestamp, old.Count+1
		r.ring.Remove(el)
		delete(r.keyOf, old)
	}
	r.version++
	ev.ResourceVersion = strconv.FormatUint(r.version, 10)
	r.byKey[key] = r.ring.PushBack(ev)
	r.keyOf[ev] = key
	for r.ring.Len() > r.capacity {
		oldest := r.ring.Remove(r.ring.Front()).(*v1.Event)
		delete(r.byKey, r.keyOf[oldest])
		delete(r.keyOf, oldest)
	}
	out := *ev
	r.publishLocked(out)
	r.mu.Unlock()

	r.log(out)
}

// aggregateLocked is client-go's EventAggregate: it returns the key the event
// is counted under, and when too many similar events came it turns ev into
// the combined event.
func (r *Recorder) aggregateLocked(ev *v1.Event, now time.Time) string {
	o := ev.InvolvedObject
	aggKey := strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name, string(o.UID),
		o.APIVersion, ev.Type, ev.Reason, ev.ReportingController, ev.ReportingInstance}, "\x00")
	eventKey := strings.Join([]string{ev.Source.Component, ev.Source.Host, o.Kind, o.Namespace, o.Name, o.FieldPath,
		string(o.UID), o.APIVersion, ev.Type, ev.Reason, ev.Message}, "\x00")

	st := r.aggregates[aggKey]
	if st == nil || now.Sub(st.last) > aggregateInterval {
		st = &aggregateState{messages: map[string]bool{}}
		if len(r.aggregates) >= maxAggregates {
			r.pruneAggregatesLocked(now)
		}
		r.aggregates[aggKey] = st
	}
	st.messages[ev.Message] = true
	st.last = now
	if len(st.messages) < aggregateMaxEvents {
		return eventKey
	}
	for m := range st.messages { // do not grow past the threshold
		delete(st.messages, m)
		break
	}
	ev.Message = podspec.Truncate(aggregatePrefix+ev.Message, podspec.MaxEventMessage)
	return aggKey
}

func (r *Recorder) pruneAggregatesLocked(now time.Time) {
	for k, st := range r.aggregates {
		if now.Sub(st.last) > aggregateInterval {
			delete(r.aggregates, k)
		}
	}
	if len(r.aggregates) >= maxAggregates {
		clear(r.aggregates)
	}
}

// log writes the event to the daemon's log: warnings at warning level.
func (r *Recorder) log(ev v1.Event) {
	level := slog.LevelInfo
	if ev.Type == v1.EventTypeWarning {
		level = slog.LevelWarn
	}
	attrs := []any{"type", ev.Type, "reason", ev.Reason}
	switch o := ev.InvolvedObject; o.Kind {
	case "Pod":
		attrs = append(attrs, "pod", o.Namespace+"/"+o.Name, "uid", string(o.UID))
		if c := Container(o.FieldPath); c != "" {
			attrs = append(attrs, "container", c)
		}
	default:
		attrs = append(attrs, "object", strings.ToLower(o.Kind)+"/"+o.Name)
	}
	attrs = append(attrs, "message", ev.Message)
	if ev.Count > 1 {
		attrs = append(attrs, "count", ev.Count)
	}
	r.logger.Log(context.Background(), level, "event", attrs...)
}

// Keep adds ev, made elsewhere, as it is: its times and count stay, it is
// counted with no other and not logged. The command line shows a stopped
// daemon's records so (agent.Records).
func (r *Recorder) Keep(ev v1.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.version++
	ev.ResourceVersion = strconv.FormatUint(r.version, 10)
	r.ring.PushBack(&ev)
	for r.ring.Len() > r.capacity {
		oldest := r.ring.Remove(r.ring.Front()).(*v1.Event)
		delete(r.byKey, r.keyOf[oldest])
		delete(r.keyOf, oldest)
	}
	r.publishLocked(ev)
}

// List returns the events kept, the least recently changed first.
func (r *Recorder) List() []v1.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.listLocked()
}

func (r *Recorder) listLocked() []v1.Event {
	out := make([]v1.Event, 0, r.ring.Len())
	for el := r.ring.Front(); el != nil; el = el.Next() {
		out = append(out, *el.Value.(*v1.Event))
	}
	return out
}

// Subscription receives every event recorded or counted again after it was
// made. A subscriber that falls subscriberBuffer events behind is dropped:
// its channel is closed and Dropped reports true.
type Subscription struct {
	r       *Recorder
	ch      chan v1.Event
	dropped bool // guarded by r.mu
	closed  bool // guarded by r.mu
}

// Subscribe returns the events kept now and a subscription to the ones that
// come after, with nothing lost or repeated in between. Close it when done.
func (r *Recorder) Subscribe() ([]v1.Event, *Subscription) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &Subscription{r: r, ch: make(chan v1.Event, subscriberBuffer)}
	r.subs[s] = struct{}{}
	return r.listLocked(), s
}

// C delivers the events. It is closed when the subscriber was dropped or
// closed.
func (s *Subscription) C() <-chan v1.Event { return s.ch }

// Dropped reports whether the subscriber fell too far behind and was dropped.
func (s *Subscription) Dropped() bool {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	return s.dropped
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	s.closeLocked()
}

func (s *Subscription) closeLocked() {
	if s.closed {
		return
	}
	s.closed = true
	delete(s.r.subs, s)
	close(s.ch)
}

func (r *Recorder) publishLocked(ev v1.Event) {
	for s := range r.subs {
		select {
		case s.ch <- ev:
		default:
			s.dropped = true
			s.closeLocked()
		}
	}
}
