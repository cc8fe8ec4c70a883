package lifecycle

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/podspec"
)

// PreStop is a container's preStop hook, ready to run in its kill, before
// its stop signal; its time comes out of the grace period (kuberuntime
// killContainer).
type PreStop struct {
	Hook   *v1.LifecycleHandler
	Target Target
	Pod    string // the kubelet's format.Pod
	Logger *slog.Logger
	// Wait waits for the container to exit, and returns its status.
	Wait func(ctx context.Context) (podspec.ContainerStatus, error)
	// Failed is told that the hook failed (the FailedPreStopHook event),
	// not when it was cut by the grace period or by the daemon's stop.
	Failed func()
}

// Run runs the hook of container id for at most grace, and returns early if
// the container exits meanwhile, with its status (exited).
func (p *PreStop) Run(ctx context.Context, id string, grace time.Duration) (st podspec.ContainerStatus, exited bool) {
	p.Logger.Info("running preStop hook", "grace", grace)
	hctx, cancel := context.WithTimeout(ctx, grace)
	var waiting sync.WaitGroup
	defer waiting.Wait()
	defer cancel()
	exit := make(chan podspec.ContainerStatus, 1)
	waiting.Go(func() {
		if st, err := p.Wait(hctx); err == nil {
			exit <- st
			cancel() // nothing left to prepare for stopping
		}
	})
	msg, err := Run(hctx, p.Hook, p.Target, p.Pod, p.Logger)
	select {
	case st := <-exit:
		if st.ID == "" {
			st.ID = id
		}
		st.State = podspec.StateExited
		p.Logger.Info("container exited during its preStop hook")
		return st, true
	default:
	}
	switch {
	case ctx.Err() != nil && !errors.Is(context.Cause(ctx), context.DeadlineExceeded):
	case errors.Is(context.Cause(hctx), context.DeadlineExceeded):
		p.Logger.Info("preStop hook not completed in grace period", "grace", grace)
	case err != nil:
		p.Logger.Warn("preStop hook failed", "reason", events.FailedPreStopHook, "message", msg)
		p.Failed()
	}
	return st, false
}
