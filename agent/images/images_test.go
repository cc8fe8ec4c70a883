package images

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/status"
)

// puller is a store without the image and a registry that answers err.
type puller struct {
	err   error
	pulls int
}

func (p *puller) Present(string) (bool, error) { return false, nil }

func (p *puller) Pull(ctx context.Context, image string, o PullOptions) error {
	p.pulls++
	return p.err
}

// A failed pull waits ErrImagePull until its back-off ends, ImagePullBackOff
// with the last error meanwhile, 10s doubling; Forget starts the pod's
// back-off over.
func TestEnsureBackOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &puller{err: errors.New("registry says no")}
		never := func() <-chan struct{} { return nil }
		m := NewManager(p, events.New("node1", 100, slog.New(slog.DiscardHandler)), never, slog.New(slog.DiscardHandler))
		pod := &v1.Pod{}
		pod.Name, pod.Namespace, pod.UID = "web", "default", "u1"
		c := &v1.Container{Name: "app", Image: "example.com/app:1", ImagePullPolicy: v1.PullIfNotPresent}
		var reason, message string
		req := Request{Pod: pod, Container: c, Image: c.Image,
			Waiting: func(r, msg string) { reason, message = r, msg }, Publish: func() {}}
		t0 := time.Now()
		ok, retry, _ := m.Ensure(t.Context(), req)
		if ok || reason != status.ErrImagePull || message != "registry says no" || retry.Sub(t0) != 10*time.Second {
			t.Fatalf("first failure: ok %v, %s %q, retry in %v", ok, reason, message, retry.Sub(t0))
		}
		time.Sleep(5 * time.Second)
		ok, retry, _ = m.Ensure(t.Context(), req)
		if ok || p.pulls != 1 || reason != status.ImagePullBackOff || !strings.HasSuffix(message, ": ErrImagePull: registry says no") || retry.Sub(t0) != 10*time.Second {
			t.Fatalf("in back-off: ok %v, %d pulls, %s %q, retry at %v", ok, p.pulls, reason, message, retry.Sub(t0))
		}
		time.Sleep(5 * time.Second)
		if _, retry, _ = m.Ensure(t.Context(), req); p.pulls != 2 || retry.Sub(time.Now()) != 20*time.Second {
			t.Fatalf("second failure: %d pulls, next in %v, want 2 and 20s", p.pulls, retry.Sub(time.Now()))
		}
		m.Forget("u1")
		p.err = nil
		req.First = true // never ran: waits ContainerCreating during the pull, nothing after
		if ok, _, pulled := m.Ensure(t.Context(), req); !ok || !pulled || p.pulls != 3 || reason != "" {
			t.Fatalf("after Forget: ok %v pulled %v, %d pulls, reason %q", ok, pulled, p.pulls, reason)
		}
	})
}
