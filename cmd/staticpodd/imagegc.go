package main

import (
	"context"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/oci/image"
)

// imageGCPeriod is how often images are collected: the kubelet's
// ImageGCPeriod.
const imageGCPeriod = 5 * time.Minute

// imageGCPolicy is the policy of the configuration that runs now, and
// whether collection is on: the kubelet turns it off when
// imageGCHighThresholdPercent is 100 and imageMaximumGCAge 0
// (StartGarbageCollection).
func (d *daemon) imageGCPolicy() (image.GCPolicy, bool) {
	d.cfgMu.Lock()
	defer d.cfgMu.Unlock()
	p := image.GCPolicy{
		HighThresholdPercent: int(d.cfg.ImageGCHighThresholdPercent),
		LowThresholdPercent:  int(d.cfg.ImageGCLowThresholdPercent),
		MinAge:               d.cfg.ImageMinimumGCAge,
		MaxAge:               d.cfg.ImageMaximumGCAge,
	}
	return p, p.HighThresholdPercent < 100 || p.MaxAge > 0
}

// runImageGC collects images once the agent has synced (before, no pod is
// known to use an image), then every imageGCPeriod and after each reload,
// until ctx ends. Every image a manifest names is kept, its pod running or
// not.
func (d *daemon) runImageGC(ctx context.Context, importDir string) {
	select {
	case <-ctx.Done():
		return
	case <-d.notifier.synced:
	}
	began := time.Now()
	tick := time.NewTicker(imageGCPeriod)
	defer tick.Stop()
	failed := false
	for {
		if p, on := d.imageGCPolicy(); on {
			failed = d.collectImagesOnce(p, importDir, began, failed)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-d.collectImages:
		}
	}
}

// collectImagesOnce runs one collection, logs what it did, and reports
// whether it failed. A failure that follows another is also an event
// (ImageGCFailed), as the kubelet's; not freeing enough always is
// (FreeDiskSpaceFailed).
func (d *daemon) collectImagesOnce(p image.GCPolicy, importDir string, began time.Time, failedBefore bool) bool {
	res, err := d.images.GarbageCollect(p, d.agent.ImagesInUse(), importDir, began, time.Now())
	if len(res.Removed) > 0 {
		d.logger.Info("image garbage collection removed images", "images", res.Removed, "bytes", res.Freed)
	}
	if err == nil {
		return false
	}
	d.logger.Warn("image garbage collection failed", "err", err)
	node := events.NodeRef(d.agent.NodeName())
	switch {
	case res.Short:
		d.agent.Events().Eventf(node, v1.EventTypeWarning, events.FreeDiskSpaceFailed, "%s", err.Error())
	case failedBefore:
		d.agent.Events().Eventf(node, v1.EventTypeWarning, events.ImageGCFailed, "%s", err.Error())
	}
	return true
}

// collectImagesSoon asks for a collection now, without waiting for it.
func (d *daemon) collectImagesSoon() {
	select {
	case d.collectImages <- struct{}{}:
	default:
	}
}
