package daemon

import (
	"testing"

	"github.com/staticpodd/staticpodd/agent/config"
)

// The policy made at start asks for no pass (the first follows the agent's
// first sync); a reload's takes the new thresholds and asks for one now.
func TestImageGCReconcile(t *testing.T) {
	gc := &imageGC{collect: make(chan struct{}, 1)}
	gc.setPolicy(&config.Config{ImageGCHighThresholdPercent: 100})
	if _, on := gc.imageGCPolicy(); on {
		t.Error("collection on at imageGCHighThresholdPercent 100 and no imageMaximumGCAge")
	}
	select {
	case <-gc.collect:
		t.Error("the policy made at start asked for a pass")
	default:
	}
	gc.Reconcile(&config.Config{ImageGCHighThresholdPercent: 85, ImageGCLowThresholdPercent: 80})
	if p, on := gc.imageGCPolicy(); !on || p.HighThresholdPercent != 85 || p.LowThresholdPercent != 80 {
		t.Errorf("policy after a reload = %+v, on %v", p, on)
	}
	select {
	case <-gc.collect:
	default:
		t.Error("a reload asked for no pass")
	}
}
