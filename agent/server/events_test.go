package server

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/events"
)

func testRecorder() (*events.Recorder, v1.ObjectReference) {
	rec := events.New("node1", 0, slog.New(slog.DiscardHandler))
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-node1", Namespace: "default", UID: "u1"},
		Spec: v1.PodSpec{Containers: []v1.Container{{Name: "web"}}}}
	return rec, events.ContainerRef(pod, "web")
}

// GET /events is a v1.EventList; it is the CLI socket's only.
func TestEventsList(t *testing.T) {
	rec, ref := testRecorder()
	rec.Eventf(ref, v1.EventTypeNormal, events.Started, "Container started")
	srv := httptest.NewServer(CLI(fakeAgent{events: rec}, logger()))
	defer srv.Close()
	code, ctype, body := get(t, srv.Client(), srv.URL+"/events")
	var list v1.EventList
	if err := json.Unmarshal(body, &list); err != nil || code != 200 || ctype != "application/json" {
		t.Fatalf("/events = %d %s %q: %v", code, ctype, body, err)
	}
	if list.Kind != "EventList" || len(list.Items) != 1 || list.Items[0].Reason != "Started" ||
		list.Items[0].InvolvedObject.FieldPath != "spec.containers{web}" {
		t.Errorf("/events = %+v", list)
	}
	ro := httptest.NewServer(ReadOnly(fakeAgent{events: rec}, nil, logger()))
	defer ro.Close()
	if code, _, _ := get(t, ro.Client(), ro.URL+"/events"); code != http.StatusNotFound {
		t.Errorf("read-only /events = %d, want 404", code)
	}
}

// GET /events?watch=true sends what is kept, then each new event as ADDED
// and each one counted again as MODIFIED, as they come.
func TestEventsWatch(t *testing.T) {
	rec, ref := testRecorder()
	rec.Eventf(ref, v1.EventTypeNormal, events.Created, "Container created")
	srv := httptest.NewServer(CLI(fakeAgent{events: rec}, logger()))
	defer srv.Close()
	resp, err := srv.Client().Get(srv.URL + "/events?watch=true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := bufio.NewScanner(resp.Body)
	next := func() (string, v1.Event) {
		t.Helper()
		if !lines.Scan() {
			t.Fatalf("watch ended: %v", lines.Err())
		}
		var we WatchEvent
		var ev v1.Event
		if err := json.Unmarshal(lines.Bytes(), &we); err != nil {
			t.Fatalf("line %q: %v", lines.Bytes(), err)
		}
		if err := json.Unmarshal(we.Object, &ev); err != nil {
			t.Fatalf("object %q: %v", we.Object, err)
		}
		return we.Type, ev
	}
	if typ, ev := next(); typ != WatchAdded || ev.Reason != "Created" {
		t.Errorf("first line %s %s, want the kept event ADDED", typ, ev.Reason)
	}
	// The kept event was sent before Subscribe returned to the handler's
	// loop: what is recorded now is a new line.
	rec.Eventf(ref, v1.EventTypeNormal, events.Started, "Container started")
	if typ, ev := next(); typ != WatchAdded || ev.Reason != "Started" {
		t.Errorf("second line %s %s, want Started ADDED", typ, ev.Reason)
	}
	rec.Eventf(ref, v1.EventTypeNormal, events.Created, "Container created")
	if typ, ev := next(); typ != WatchModified || ev.Reason != "Created" || ev.Count != 2 {
		t.Errorf("third line %s %s count %d, want Created MODIFIED, counted twice", typ, ev.Reason, ev.Count)
	}
}
