package daemon

import (
	"context"
	"log/slog"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent"
	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/tick"
	"github.com/staticpodd/staticpodd/oci/image"
)

// imageGCPeriod is how often images are collected: the kubelet's
// ImageGCPeriod.
const imageGCPeriod = 5 * time.Minute

// imageGC is the image garbage collector, a component: it collects images
// once the agent has synced (before, no pod is known to use an image), then
// every imageGCPeriod and after each reload, until it is stopped. Every image
// a manifest names is kept, its pod running or not.
type imageGC struct {
	store     *image.Store
	agent     *agent.Agent
	logger    *slog.Logger
	importDir string
	synced    <-chan struct{} // closed by the agent's first sync
	// collect asks for a pass now (a reload); one slot.
	collect chan struct{}

	mu     sync.Mutex // guards policy and on
	policy image.GCPolicy
	on     bool

	cancel context.CancelFunc
	done   chan struct{}
}

func (*imageGC) Reloads() config.Reload { return config.ReloadImageGC }

// Reconcile takes the policy of a reload's configuration and asks for a pass
// now, without waiting for it: a reload is also how to ask for one.
func (gc *imageGC) Reconcile(cfg *config.Config) {
	gc.setPolicy(cfg)
	gc.collectImagesSoon()
}

// setPolicy takes the policy of cfg, and whether collection is on: the
// kubelet turns it off when imageGCHighThresholdPercent is 100 and
// imageMaximumGCAge 0 (StartGarbageCollection).
func (gc *imageGC) setPolicy(cfg *config.Config) {
	p := image.GCPolicy{
		HighThresholdPercent: int(cfg.ImageGCHighThresholdPercent),
		LowThresholdPercent:  int(cfg.ImageGCLowThresholdPercent),
		MinAge:               cfg.ImageMinimumGCAge,
		MaxAge:               cfg.ImageMaximumGCAge,
	}
	gc.mu.Lock()
	gc.policy, gc.on = p, p.HighThresholdPercent < 100 || p.MaxAge > 0
	gc.mu.Unlock()
}

func (gc *imageGC) imageGCPolicy() (image.GCPolicy, bool) {
	gc.mu.Lock()
	defer gc.mu.Unlock()
	return gc.policy, gc.on
}

func (gc *imageGC) Start(ctx context.Context) error {
	ctx, gc.cancel = context.WithCancel(ctx)
	gc.done = make(chan struct{})
	go func() {
		defer close(gc.done)
		gc.runImageGC(ctx)
	}()
	return nil
}

func (gc *imageGC) Stop() {
	gc.cancel()
	<-gc.done
}

// runImageGC collects until ctx ends.
func (gc *imageGC) runImageGC(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-gc.synced:
	}
	began := time.Now()
	every := tick.New(imageGCPeriod)
	defer every.Stop()
	failed := false
	for {
		if p, on := gc.imageGCPolicy(); on {
			failed = gc.collectImagesOnce(p, gc.importDir, began, failed)
		}
		select {
		case <-ctx.Done():
			return
		case <-every.C:
		case <-gc.collect:
		}
	}
}

// collectImagesOnce runs one collection, logs what it did, and reports
// whether it failed. A failure that follows another is also an event
// (ImageGCFailed), as the kubelet's; not freeing enough always is
// (FreeDiskSpaceFailed).
func (gc *imageGC) collectImagesOnce(p image.GCPolicy, importDir string, began time.Time, failedBefore bool) bool {
	res, err := gc.store.GarbageCollect(p, gc.agent.ImagesInUse(), importDir, began, time.Now())
	if len(res.Removed) > 0 {
		gc.logger.Info("image garbage collection removed images", "images", res.Removed, "bytes", res.Freed)
	}
	if err == nil {
		return false
	}
	gc.logger.Warn("image garbage collection failed", "err", err)
	node := events.NodeRef(gc.agent.NodeName())
	switch {
	case res.Short:
		gc.agent.Events().Eventf(node, v1.EventTypeWarning, events.FreeDiskSpaceFailed, "%s", err.Error())
	case failedBefore:
		gc.agent.Events().Eventf(node, v1.EventTypeWarning, events.ImageGCFailed, "%s", err.Error())
	}
	return true
}

// collectImagesSoon asks for a collection now, without waiting for it.
func (gc *imageGC) collectImagesSoon() {
	select {
	case gc.collect <- struct{}{}:
	default:
	}
}
