package events

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"
	"unicode/utf8"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/podspec"
)

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newRecorder(capacity int) (*Recorder, *syncBuffer) {
	logs := &syncBuffer{}
	return New("node1", capacity, slog.New(slog.NewTextHandler(logs, nil))), logs
}

func testPod() *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "kube-system", UID: "u1"},
		Spec: v1.PodSpec{
			InitContainers: []v1.Container{{Name: "setup"}},
			Containers:     []v1.Container{{Name: "web"}},
		},
	}
}

func TestRefs(t *testing.T) {
	pod := testPod()
	if got := ContainerRef(pod, "web"); got.FieldPath != "spec.containers{web}" || got.Kind != "Pod" || got.UID != "u1" ||
		got.Namespace != "kube-system" || got.APIVersion != "v1" {
		t.Errorf("container ref = %+v", got)
	}
	if got := ContainerRef(pod, "setup").FieldPath; got != "spec.initContainers{setup}" {
		t.Errorf("init container field path %q", got)
	}
	pod.Spec.EphemeralContainers = []v1.EphemeralContainer{{EphemeralContainerCommon: v1.EphemeralContainerCommon{Name: "debugger-abcde"}}}
	if got := ContainerRef(pod, "debugger-abcde").FieldPath; got != "spec.ephemeralContainers{debugger-abcde}" {
		t.Errorf("ephemeral container field path %q", got)
	}
	for path, want := range map[string]string{"spec.containers{web}": "web", "spec.initContainers{setup}": "setup",
		"spec.ephemeralContainers{debugger-abcde}": "debugger-abcde", "": "", "metadata": ""} {
		if got := Container(path); got != want {
			t.Errorf("Container(%q) = %q, want %q", path, got, want)
		}
	}
}

// A repeat of the same event counts on the first one: same name, first
// timestamp kept, last moved, count up; it moves to the end of the list.
func TestRepeatsAreCounted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, logs := newRecorder(0)
		ref := ContainerRef(testPod(), "web")
		t0 := time.Now()
		r.Eventf(ref, v1.EventTypeWarning, BackOff, "Back-off restarting failed container %s", "web")
		time.Sleep(time.Minute)
		r.Eventf(ref, v1.EventTypeNormal, Started, "Container started")
		time.Sleep(time.Minute)
		r.Eventf(ref, v1.EventTypeWarning, BackOff, "Back-off restarting failed container web")

		list := r.List()
		if len(list) != 2 {
			t.Fatalf("%d events, want 2", len(list))
		}
		ev := list[1]
		if ev.Reason != BackOff || ev.Count != 2 || !ev.FirstTimestamp.Time.Equal(t0) ||
			!ev.LastTimestamp.Time.Equal(t0.Add(2*time.Minute)) || ev.Name != fmt.Sprintf("web-node1.%x", t0.UnixNano()) {
			t.Errorf("repeated event = %+v", ev)
		}
		if ev.Namespace != "kube-system" || ev.Source.Component != "staticpodd" || ev.Source.Host != "node1" ||
			ev.ReportingController != "staticpodd" || ev.ReportingInstance != "node1" {
			t.Errorf("event metadata = %+v", ev)
		}
		if !strings.Contains(logs.String(), `level=WARN msg=event type=Warning reason=BackOff pod=kube-system/web-node1 uid=u1 container=web message="Back-off restarting failed container web" count=2`) {
			t.Errorf("log:\n%s", logs)
		}
	})
}

// More than ten events about one object that differ only by message within
// ten minutes become one combined event, counted, as client-go does.
func TestSimilarEventsAreCombined(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, _ := newRecorder(0)
		ref := ContainerRef(testPod(), "web")
		for i := range 15 {
			r.Eventf(ref, v1.EventTypeWarning, Unhealthy, "Liveness probe failed: attempt %d", i)
			time.Sleep(time.Second)
		}
		list := r.List()
		if len(list) != 10 {
			t.Fatalf("%d events, want 9 distinct and 1 combined", len(list))
		}
		last := list[len(list)-1]
		if last.Message != "(combined from similar events): Liveness probe failed: attempt 14" || last.Count != 6 {
			t.Errorf("combined event = %q count %d", last.Message, last.Count)
		}
		// Ten quiet minutes later, messages are told apart again.
		time.Sleep(11 * time.Minute)
		r.Eventf(ref, v1.EventTypeWarning, Unhealthy, "Liveness probe failed: again")
		if list := r.List(); list[len(list)-1].Message != "Liveness probe failed: again" {
			t.Errorf("after the interval: %q", list[len(list)-1].Message)
		}
	})
}

// The ring keeps the newest events; a repeat of one dropped starts afresh.
func TestRingIsBounded(t *testing.T) {
	r, _ := newRecorder(3)
	node := NodeRef("node1")
	for i := range 5 {
		r.Eventf(node, v1.EventTypeNormal, Starting, "event %d", i)
	}
	var got []string
	for _, e := range r.List() {
		got = append(got, e.Message)
	}
	if strings.Join(got, ",") != "event 2,event 3,event 4" {
		t.Errorf("kept %q, want the newest three", got)
	}
	r.Eventf(node, v1.EventTypeNormal, Starting, "event 0")
	if l := r.List(); l[2].Message != "event 0" || l[2].Count != 1 || l[2].Namespace != "default" {
		t.Errorf("a dropped event again = %+v", l[2])
	}
}

// A subscriber gets what was kept, then every new or counted event, in order.
func TestSubscribe(t *testing.T) {
	r, _ := newRecorder(0)
	ref := ContainerRef(testPod(), "web")
	r.Eventf(ref, v1.EventTypeNormal, Created, "Container created")
	past, sub := r.Subscribe()
	defer sub.Close()
	if len(past) != 1 || past[0].Reason != Created {
		t.Fatalf("past = %+v", past)
	}
	r.Eventf(ref, v1.EventTypeNormal, Started, "Container started")
	r.Eventf(ref, v1.EventTypeNormal, Created, "Container created")
	for _, want := range []string{"Started/1", "Created/2"} {
		ev := <-sub.C()
		if got := fmt.Sprintf("%s/%d", ev.Reason, ev.Count); got != want {
			t.Errorf("got %s, want %s", got, want)
		}
	}
	sub.Close()
	if _, ok := <-sub.C(); ok {
		t.Error("channel open after Close")
	}
	if sub.Dropped() {
		t.Error("a closed subscriber counts as dropped")
	}
}

// A subscriber that does not read is dropped; the recorder never waits.
func TestSlowSubscriberDropped(t *testing.T) {
	r, _ := newRecorder(0)
	_, sub := r.Subscribe()
	for i := range subscriberBuffer + 1 {
		r.Eventf(NodeRef("node1"), v1.EventTypeNormal, Starting, "event %d", i)
	}
	n := 0
	for range sub.C() {
		n++
	}
	if n != subscriberBuffer || !sub.Dropped() {
		t.Errorf("read %d events, dropped %v; want %d and dropped", n, sub.Dropped(), subscriberBuffer)
	}
	sub.Close() // closing a dropped subscription is fine
}

// An event's message quotes what a container or a registry said: it is cut
// to podspec.MaxEventMessage in the ring, in the log and for subscribers,
// combined or not.
func TestMessageBounded(t *testing.T) {
	r, logs := newRecorder(0)
	_, sub := r.Subscribe()
	defer sub.Close()
	ref := ContainerRef(testPod(), "web")
	long := strings.Repeat("é", 8<<20) // two bytes each: a cut must not split one
	for i := range aggregateMaxEvents + 2 {
		r.Eventf(ref, v1.EventTypeWarning, Unhealthy, "Readiness probe failed: %d %s", i, long)
	}
	list := r.List()
	if len(list) == 0 {
		t.Fatal("no events")
	}
	for _, ev := range list {
		if len(ev.Message) > podspec.MaxEventMessage || !utf8.ValidString(ev.Message) {
			t.Errorf("event message of %d bytes (valid UTF-8: %v), want at most %d", len(ev.Message), utf8.ValidString(ev.Message), podspec.MaxEventMessage)
		}
	}
	if last := list[len(list)-1].Message; !strings.HasPrefix(last, aggregatePrefix+"Readiness probe failed: ") {
		t.Errorf("combined event %.80q", last)
	}
	for range aggregateMaxEvents + 2 {
		if ev := <-sub.C(); len(ev.Message) > podspec.MaxEventMessage {
			t.Errorf("subscriber got a message of %d bytes", len(ev.Message))
		}
	}
	if n := len(logs.String()); n > (aggregateMaxEvents+2)*(podspec.MaxEventMessage+512) {
		t.Errorf("%d events logged in %d bytes", aggregateMaxEvents+2, n)
	}
}
