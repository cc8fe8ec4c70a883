package mirror

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
)

// An API server that takes an event post and never answers must not hold
// the mirror's stop (and so the daemon's) for the REST client's request
// timeout: the post ends with the writer's context.
func TestEventWriterStopsWhileAPIServerHangs(t *testing.T) {
	called := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case called <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	api, err := newRESTAPI(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := newEventWriter(api.EventSink(ctx), 5*time.Second)
	queue := make(chan v1.Event, 1)
	queue <- v1.Event{ObjectMeta: metav1.ObjectMeta{Name: "n.1", Namespace: "default"}, Count: 1,
		InvolvedObject: v1.ObjectReference{Kind: "Node", Name: "n"}, Type: v1.EventTypeNormal, Reason: "Starting"}
	done := make(chan struct{})
	go func() { defer close(done); w.run(ctx, queue) }()
	<-called
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second): // the request timeout is 10s
		t.Fatal("eventWriter.run did not return after its context ended: an unanswered post holds the mirror's stop")
	}
}
