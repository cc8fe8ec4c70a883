package source

import (
	"context"
	"testing"
	"time"
)

// Mux.Run is the body of the daemon's "sources" component, whose Stop
// returns once Run has: a source still busy after the cancel (a URL source
// in the middle of a request, a file source writing the seen store) must
// have ended by then, or it outlives the component and the run-dir lock.
func TestMuxRunJoinsSources(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	ended := make(chan struct{})
	s := NewMux()
	s.Set("file", &Running{
		Key: "k",
		Run: func(ctx context.Context, out chan<- Update) error {
			defer close(ended)
			close(started)
			<-ctx.Done()
			<-release // still busy after the cancel
			return nil
		},
		Relist: func() {},
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, make(chan Update)) }()
	<-started
	cancel()
	// The source stays busy a while after the cancel; the timer only ends
	// that, it is not what the test asserts: a Run that joins its sources
	// cannot return before it fires, one that does not returns at once.
	time.AfterFunc(100*time.Millisecond, func() { close(release) })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	select {
	case <-ended:
	default:
		t.Fatal("Mux.Run returned while a source's Run was still running: its goroutine is not joined")
	}
}
