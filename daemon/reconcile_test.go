package daemon

import (
	"testing"

	"github.com/staticpodd/staticpodd/agent/component"
	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/agent/mirror"
)

// Every live group of agent/config's table is applied by a component that
// Run starts before the signals: a group without one would be logged as
// applied by a reload and change nothing.
func TestEveryLiveGroupHasAReconciler(t *testing.T) {
	for _, withMirror := range []bool{false, true} {
		d := &System{cfg: &config.Config{}, imageGC: &imageGC{}}
		if withMirror {
			d.mirror = &mirror.Mirror{}
		}
		owners := map[config.Reload]int{}
		for _, c := range d.reconcilers() {
			r, ok := c.(component.Reconciler)
			if !ok {
				t.Errorf("%T is started for reloads but takes no configuration", c)
				continue
			}
			owners[r.Reloads()]++
		}
		for _, g := range config.LiveGroups() {
			if owners[g] == 0 {
				t.Errorf("mirror %v: live group %v has no Reconciler", withMirror, g)
			}
		}
		// The mirror reports evictionHard in the Node's configuration.
		if withMirror && owners[config.ReloadEviction] != 2 {
			t.Errorf("with a mirror, %d reconcilers of eviction, want the agent's and the mirror's", owners[config.ReloadEviction])
		}
	}
}

// A reconciler applies its group only where it changed: a reload that
// changes another group leaves its part alone (here nil, which a call
// would dereference), as one whose configuration does not load does.
func TestReconcilerAppliesOnlyItsGroup(t *testing.T) {
	start := &config.Config{ContainerLogMaxSize: 10 << 20, EvictionHard: map[string]string{"memory.available": "100Mi"}}
	other := *start
	other.ImageGCHighThresholdPercent = 90
	for _, r := range []component.Reconciler{
		&liveEviction{cfg: start},
		&liveEvictionHard{cfg: start},
		&liveLogRotation{cfg: start},
	} {
		r.Reconcile(&other)
	}
	// The mirror, whose SetEvictionHard needs nothing running, takes a
	// changed evictionHard.
	e := &liveEvictionHard{mirror: &mirror.Mirror{}, cfg: start}
	changed := other
	changed.EvictionHard = map[string]string{"memory.available": "200Mi"}
	e.Reconcile(&changed)
	if e.cfg != &changed {
		t.Error("a changed evictionHard was not applied")
	}
}
