package component

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/staticpodd/staticpodd/agent/config"
)

type recorder struct {
	name string
	log  *[]string
	cfg  *config.Config
}

func (r *recorder) Start(context.Context) error { *r.log = append(*r.log, "start "+r.name); return nil }
func (r *recorder) Stop()                       { *r.log = append(*r.log, "stop "+r.name) }

type reconciling struct{ recorder }

func (r *reconciling) Reloads() config.Reload       { return config.ReloadLogs }
func (r *reconciling) Reconcile(cfg *config.Config) { r.cfg = cfg }

func TestManagerOrder(t *testing.T) {
	var log []string
	m := NewManager(context.Background())
	a, b := &recorder{name: "a", log: &log}, &reconciling{recorder{name: "b", log: &log}}
	for _, c := range []Component{a, b} {
		if err := m.Start(c); err != nil {
			t.Fatal(err)
		}
	}
	cfg := &config.Config{}
	m.Reconcile(cfg)
	if b.cfg != cfg {
		t.Error("Reconcile did not reach the component that takes a configuration")
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"start a", "start b", "stop b", "stop a"}; !slices.Equal(log, want) {
		t.Errorf("got %q, want %q", log, want)
	}
}

func TestManagerFailure(t *testing.T) {
	boom := errors.New("boom")
	m := NewManager(context.Background())
	stopped := false
	if err := m.Start(NewTask(func(ctx context.Context) error { <-ctx.Done(); stopped = true; return nil })); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(NewTask(func(context.Context) error { return boom })); err != nil {
		t.Fatal(err)
	}
	m.Wait() // ends with the failure
	if err := m.Stop(); !errors.Is(err, boom) {
		t.Fatalf("Stop = %v, want %v", err, boom)
	}
	if !stopped {
		t.Error("the other task was not stopped and joined")
	}
	if !errors.Is(context.Cause(m.Context()), boom) {
		t.Errorf("context's cause %v, want %v", context.Cause(m.Context()), boom)
	}
}

func TestManagerParentEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	m := NewManager(ctx)
	if err := m.Start(NewTask(func(ctx context.Context) error { <-ctx.Done(); return nil })); err != nil {
		t.Fatal(err)
	}
	cancel()
	m.Wait()
	if err := m.Stop(); err != nil {
		t.Fatalf("Stop = %v, want nil", err)
	}
}
