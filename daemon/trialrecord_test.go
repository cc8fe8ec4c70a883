package daemon

import (
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/oci/bundle"
)

// A trial that fails when the bundle before it has no record any more
// (removed, or a root dir restored without it) does not roll back to
// nothing: the bundle source could not read such a Current, and the failed
// bundle would be released under its running pods. It is left running, as
// a bundle with none before it.
func TestBundleTrialPreviousRecordGone(t *testing.T) {
	tr, a, now := trialFixture(t, 30*time.Second, false)
	if err := os.RemoveAll(bundle.RecordDir(tr.rootDir, hexA)); err != nil {
		t.Fatal(err)
	}
	a.pods = []v1.Pod{pod("uid-web", false, now.Add(-time.Minute))}
	tr.now = func() time.Time { return now.Add(time.Minute) }
	tr.check()
	st := stateOf(t, tr)
	if st.Current != hexB || !st.Trial.IsZero() {
		t.Fatalf("state %+v: want B left current, its trial ended", st)
	}
	if !recorded(tr, hexB) {
		t.Fatal("the bundle left running was released")
	}
	if e := a.event(events.RolledBack); !strings.Contains(e, "left running") {
		t.Errorf("event %q, want it to say the bundle is left running", e)
	}
}
