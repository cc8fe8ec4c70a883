package mirror

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	ktesting "k8s.io/client-go/testing"

	"github.com/staticpodd/staticpodd/agent/events"
)

// serverEvents returns the events on the API server about the node named
// object, by message.
func serverEvents(t *testing.T, client kubernetes.Interface, object string) map[string]v1.Event {
	t.Helper()
	list, err := client.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]v1.Event{}
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == object {
			out[ev.Message] = ev
		}
	}
	return out
}

// The API server gets the agent's events as the agent counted and combined
// them: a repeat counts on the event posted first, more than ten that differ
// only by message become one combined event, and client-go's spam filter
// lets at most 25 events about one object (and type) through at once.
func TestEventsPostedAsTheAgentCorrelatedThem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		pods := newFakePods()
		start(t, client, pods)
		rec := pods.Events()

		repeated := events.NodeRef("repeated")
		for range 3 {
			rec.Eventf(repeated, v1.EventTypeNormal, events.Starting, "Starting staticpodd.")
			time.Sleep(time.Second)
		}
		eventually(t, "the repeated event counted on the API server", func() bool {
			return serverEvents(t, client, "repeated")["Starting staticpodd."].Count == 3
		})
		if got := serverEvents(t, client, "repeated"); len(got) != 1 {
			t.Errorf("repeats made %d events on the API server, want 1: %+v", len(got), got)
		}

		similar := events.NodeRef("similar")
		for i := range 12 {
			rec.Eventf(similar, v1.EventTypeWarning, events.FailedValidation, "bad manifest %d", i)
			time.Sleep(time.Second)
		}
		const combined = "(combined from similar events): bad manifest 11"
		eventually(t, "the combined event on the API server", func() bool {
			return serverEvents(t, client, "similar")[combined].Count == 3
		})
		got := serverEvents(t, client, "similar")
		for i := range 9 {
			if ev, ok := got[fmt.Sprintf("bad manifest %d", i)]; !ok || ev.Count != 1 {
				t.Errorf("event %d on the API server: %+v (found %v)", i, ev, ok)
			}
		}
		if len(got) != 10 {
			t.Errorf("%d events on the API server, want 9 and the combined one: %v", len(got), got)
		}

		spam := events.NodeRef("spam")
		for range 30 {
			rec.Eventf(spam, v1.EventTypeWarning, events.ImageGCFailed, "no space")
		}
		eventually(t, "the spam filter's burst on the API server", func() bool {
			return serverEvents(t, client, "spam")["no space"].Count == 25
		})
		time.Sleep(time.Minute)
		if n := serverEvents(t, client, "spam")["no space"].Count; n != 25 {
			t.Errorf("count %d on the API server after 30 events at once, want 25 (the spam filter's burst)", n)
		}
		// One more token each five minutes.
		time.Sleep(5 * time.Minute)
		rec.Eventf(spam, v1.EventTypeWarning, events.ImageGCFailed, "no space")
		eventually(t, "the next event after the filter refilled", func() bool {
			return serverEvents(t, client, "spam")["no space"].Count == 31
		})
	})
}

// A post that fails on the way is tried again (12 times at most, 5s apart);
// one the API server rejects is not.
func TestEventPostRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client := fake.NewClientset()
		var mu sync.Mutex
		failures := 0
		client.PrependReactor("create", "events", func(a ktesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			ev := a.(ktesting.CreateAction).GetObject().(*v1.Event)
			switch {
			case ev.InvolvedObject.Name == "flaky" && failures < 3:
				failures++
				return true, nil, errors.New("connection refused")
			case ev.InvolvedObject.Name == "rejected":
				failures++
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "events"}, ev.Name, errors.New("no"))
			}
			return false, nil, nil
		})
		pods := newFakePods()
		start(t, client, pods)
		pods.Events().Eventf(events.NodeRef("flaky"), v1.EventTypeNormal, events.Starting, "Starting staticpodd.")
		time.Sleep(time.Minute) // three waits of at most 5s
		if n := serverEvents(t, client, "flaky")["Starting staticpodd."].Count; n != 1 {
			t.Errorf("the event tried four times has count %d on the API server, want 1", n)
		}
		pods.Events().Eventf(events.NodeRef("rejected"), v1.EventTypeNormal, events.Starting, "Starting staticpodd.")
		time.Sleep(time.Minute)
		mu.Lock()
		defer mu.Unlock()
		if failures != 4 {
			t.Errorf("%d failed posts, want 3 tries of the flaky event and 1 of the rejected one", failures)
		}
	})
}
