package daemon

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/events"
	"github.com/staticpodd/staticpodd/agent/source"
	"github.com/staticpodd/staticpodd/oci/bundle"
	"github.com/staticpodd/staticpodd/oci/image"
)

// fakeTrialAgent publishes the pods a test sets.
type fakeTrialAgent struct {
	pods []v1.Pod
	ev   *events.Recorder
}

func (f *fakeTrialAgent) Pods() []v1.Pod           { return f.pods }
func (f *fakeTrialAgent) Changed() <-chan struct{} { return nil }
func (f *fakeTrialAgent) Events() *events.Recorder { return f.ev }
func (f *fakeTrialAgent) NodeName() string         { return "node" }
func (f *fakeTrialAgent) event(reason string) string {
	for _, e := range f.ev.List() {
		if e.Reason == reason {
			return e.Type + " " + e.Message
		}
	}
	return ""
}

var (
	hexA = strings.Repeat("a", 64)
	hexB = strings.Repeat("b", 64)
)

// trialFixture is a root dir with bundles A and B recorded, B current and
// on trial since now-5s with rollbackAfter (A before it unless noPrevious),
// and a trial whose clock is now.
func trialFixture(t *testing.T, rollbackAfter time.Duration, noPrevious bool) (*bundleTrial, *fakeTrialAgent, time.Time) {
	t.Helper()
	root := t.TempDir()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	store, err := image.Open(filepath.Join(root, "images"), logger, image.WithReserve(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []bundle.Record{
		{Name: "app", Digest: "sha256:" + hexA},
		{Name: "app", Digest: "sha256:" + hexB, RollbackAfter: rollbackAfter},
	} {
		dir := bundle.ManifestsDir(root, bundle.Hex(r.Digest))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		b, _ := json.Marshal(r)
		if err := os.WriteFile(filepath.Join(filepath.Dir(dir), "bundle.json"), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	st := bundle.State{Current: hexB, Previous: hexA, Trial: now.Add(-5 * time.Second)}
	if noPrevious {
		st.Previous = ""
	}
	if err := bundle.WriteState(root, st); err != nil {
		t.Fatal(err)
	}
	a := &fakeTrialAgent{ev: events.New("node", 100, logger)}
	tr := newBundleTrial(root, store, logger)
	tr.agent, tr.now = a, func() time.Time { return now }
	tr.sent(source.BundleSent{Set: source.BundleSet{ID: hexB, Name: "app"},
		Pods: []source.BundlePod{{Namespace: "default", Name: "web-node", UID: "uid-web"}}})
	return tr, a, now
}

func pod(uid string, ready bool, since time.Time) v1.Pod {
	cond := v1.PodCondition{Type: v1.PodReady, Status: v1.ConditionFalse, LastTransitionTime: metav1.NewTime(since)}
	if ready {
		cond.Status = v1.ConditionTrue
	}
	return v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-node", UID: types.UID(uid)},
		Status: v1.PodStatus{Phase: v1.PodRunning, Conditions: []v1.PodCondition{cond}}}
}

func stateOf(t *testing.T, tr *bundleTrial) bundle.State {
	t.Helper()
	st, err := bundle.ReadState(tr.rootDir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func recorded(tr *bundleTrial, h string) bool {
	_, err := os.Stat(bundle.RecordDir(tr.rootDir, h))
	return !errors.Is(err, os.ErrNotExist)
}

// Ready for rollout.Settle of its rollback-after (30s: 10s), the bundle
// is kept and the one before released; Ready for less, it waits for it.
func TestBundleTrialKeepsWhenReadyLongEnough(t *testing.T) {
	tr, a, now := trialFixture(t, 30*time.Second, false)
	a.pods = []v1.Pod{pod("uid-web", true, now.Add(-2*time.Second))}
	if next := tr.check(); !next.Equal(now.Add(8 * time.Second)) {
		t.Errorf("Ready 2s: judged again at %v, want when it has been Ready 10s", next)
	}
	if st := stateOf(t, tr); st.Trial.IsZero() {
		t.Fatalf("kept after 2s Ready: %+v", st)
	}
	a.pods = []v1.Pod{pod("uid-web", true, now.Add(-10*time.Second))}
	if next := tr.check(); !next.IsZero() {
		t.Errorf("kept, yet judged again at %v", next)
	}
	if st := stateOf(t, tr); st.Current != hexB || !st.Trial.IsZero() || st.Previous != "" || st.RolledBack != nil {
		t.Errorf("state after keeping: %+v", st)
	}
	if recorded(tr, hexA) || !recorded(tr, hexB) {
		t.Errorf("A recorded %v (want released), B %v (want kept)", recorded(tr, hexA), recorded(tr, hexB))
	}
	if e := a.event(events.BundleReady); !strings.HasPrefix(e, "Normal Bundle app (sha256:"+hexB+") is Ready") {
		t.Errorf("event %q", e)
	}
}

// Not Ready by its deadline, the bundle is rolled back: the one before is
// current, RolledBack names the pod and why, the failed one is released.
func TestBundleTrialRollsBack(t *testing.T) {
	tr, a, now := trialFixture(t, 30*time.Second, false)
	a.pods = []v1.Pod{pod("uid-web", false, now)}
	if next := tr.check(); !next.Equal(now.Add(25 * time.Second)) {
		t.Fatalf("before the deadline: judged again at %v, want the deadline", next)
	}
	tr.now = func() time.Time { return now.Add(25 * time.Second) }
	tr.check()
	st := stateOf(t, tr)
	if st.Current != hexA || st.Previous != "" || !st.Trial.IsZero() || st.RolledBack == nil ||
		st.RolledBack.Digest != "sha256:"+hexB || !strings.Contains(st.RolledBack.Reason, "not Ready within 30s: default/web-node (Running)") {
		t.Fatalf("state after the deadline: %+v %+v", st, st.RolledBack)
	}
	if recorded(tr, hexB) || !recorded(tr, hexA) {
		t.Errorf("B recorded %v (want released), A %v (want kept)", recorded(tr, hexB), recorded(tr, hexA))
	}
	if e := a.event(events.RolledBack); !strings.HasPrefix(e, "Warning Bundle app (sha256:"+hexB+") not Ready within 30s") ||
		!strings.Contains(e, "bundle app (sha256:"+hexA+") runs again") {
		t.Errorf("event %q", e)
	}
}

// The pods of another generation (a per-pod rollback's, a pod of the file
// source's by that name) are not the bundle's; pods never sent (the source
// has not read the bundle yet) are not started; manifests the source
// cannot use roll back at once.
func TestBundleTrialReasons(t *testing.T) {
	tr, a, now := trialFixture(t, 30*time.Second, false)
	a.pods = []v1.Pod{pod("uid-other", true, now.Add(-time.Minute))}
	tr.now = func() time.Time { return now.Add(25 * time.Second) }
	tr.check()
	if st := stateOf(t, tr); st.RolledBack == nil || !strings.Contains(st.RolledBack.Reason, "default/web-node (not running)") {
		t.Errorf("another UID's pod: %+v", st.RolledBack)
	}

	tr, _, now = trialFixture(t, 30*time.Second, false)
	tr.sent(source.BundleSent{Set: source.BundleSet{ID: hexA}})
	tr.now = func() time.Time { return now.Add(25 * time.Second) }
	tr.check()
	if st := stateOf(t, tr); st.RolledBack == nil || !strings.Contains(st.RolledBack.Reason, "its pods were not started") {
		t.Errorf("never sent: %+v", st.RolledBack)
	}

	tr, _, _ = trialFixture(t, 30*time.Second, false)
	tr.sent(source.BundleSent{Set: source.BundleSet{ID: hexB}, Err: errors.New("bundle app/web.yaml: spec.containers: Required value")})
	tr.check()
	if st := stateOf(t, tr); st.Current != hexA || st.RolledBack == nil || !strings.Contains(st.RolledBack.Reason, "its manifests cannot be used: bundle app/web.yaml") {
		t.Errorf("unusable manifests, before the deadline: %+v %+v", st, st.RolledBack)
	}
}

// Without a rollback-after a bundle is kept at once; without a bundle
// before it, one not Ready is left running, its trial over.
func TestBundleTrialNoDeadlineNoPrevious(t *testing.T) {
	tr, _, _ := trialFixture(t, 0, false)
	tr.check()
	if st := stateOf(t, tr); st.Current != hexB || !st.Trial.IsZero() || st.Previous != "" || recorded(tr, hexA) {
		t.Errorf("no rollback-after: %+v, A recorded %v", st, recorded(tr, hexA))
	}

	tr, a, now := trialFixture(t, 30*time.Second, true)
	tr.now = func() time.Time { return now.Add(25 * time.Second) }
	tr.check()
	if st := stateOf(t, tr); st.Current != hexB || !st.Trial.IsZero() || st.RolledBack != nil || !recorded(tr, hexB) {
		t.Errorf("no bundle before: %+v", st)
	}
	if e := a.event(events.RolledBack); !strings.Contains(e, "no bundle before it to roll back to: left running") {
		t.Errorf("event %q", e)
	}
}

// A state that changed while the trial judged it (an apply came) is left
// to the next judgement; records no state names are released at start.
func TestBundleTrialRaceAndSweep(t *testing.T) {
	tr, _, now := trialFixture(t, 30*time.Second, false)
	was := stateOf(t, tr)
	next := bundle.State{Current: hexA, Previous: hexB, Trial: now}
	if err := bundle.WriteState(tr.rootDir, next); err != nil {
		t.Fatal(err)
	}
	if err := tr.change(was, func(cur bundle.State) (bundle.State, string) { return bundle.State{}, hexA }); err != nil {
		t.Fatal(err)
	}
	if st := stateOf(t, tr); !st.Trial.Equal(now) || st.Current != hexA || !recorded(tr, hexA) {
		t.Errorf("a stale judgement changed the state: %+v", st)
	}

	if err := bundle.WriteState(tr.rootDir, bundle.State{Current: hexA}); err != nil {
		t.Fatal(err)
	}
	tr.sweep()
	if recorded(tr, hexB) || !recorded(tr, hexA) {
		t.Errorf("after the sweep: B recorded %v (want released), A %v", recorded(tr, hexB), recorded(tr, hexA))
	}
}
