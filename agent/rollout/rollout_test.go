package rollout

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func gen(uid string) Generation {
	return Generation{UID: uid, Source: "file", Origin: "/m/" + uid + ".yaml", Manifest: "manifest of " + uid}
}

// A generation not Ready by its deadline is rolled back to the last Ready
// one; the rollback's own failure never rolls back again.
func TestRollbackNeverLoops(t *testing.T) {
	h := &History{Namespace: "kube-system", Name: "etcd-n1"}
	h.Start(gen("a"), t0)
	if !h.Ready("a", t0.Add(time.Second), map[string]string{"etcd": "sha256:aaa"}) {
		t.Fatal("first Ready not recorded")
	}
	h.Start(gen("b"), t0.Add(time.Minute))
	if dl := h.Deadline("b", 90*time.Second); !dl.Equal(t0.Add(time.Minute + 90*time.Second)) {
		t.Fatalf("deadline %v", dl)
	}
	target := h.Target()
	if target == nil || target.UID != "a" {
		t.Fatalf("target %+v, want a", target)
	}
	h.Fail("b", t0.Add(3*time.Minute), "container etcd CrashLoopBackOff, last exit code 1 (Error)", map[string]string{"etcd": "sha256:bbb"}, ByDeadline, target)
	if h.Rejected == nil || h.Rejected.UID != "b" || h.Rejected.Target != "a" {
		t.Fatalf("rejected %+v", h.Rejected)
	}
	if r, _ := h.Offered("b", ""); r == nil {
		t.Fatal("the source still offers b: the rejection must hold")
	}
	// a runs again, as a rollback of b.
	a := gen("a")
	a.RollbackOf = "b"
	h.Start(a, t0.Add(4*time.Minute))
	if st := h.Status(90 * time.Second); st.State != StateRolledBack || !st.Failed() {
		t.Fatalf("status %+v", st)
	}
	if h.Target() != nil {
		t.Fatal("a rollback run must not roll back again")
	}
	if len(h.Generations) != 2 || h.Current().UID != "a" || !h.Current().ReadyAt.IsZero() {
		t.Fatalf("generations %+v", h.Generations)
	}
	// The file changes: the rejection is lifted.
	if r, changed := h.Offered("c", ""); r != nil || !changed || h.Rejected != nil {
		t.Fatalf("rejection not lifted: %+v", h.Rejected)
	}
}

func TestNoTargetWithoutReadyGeneration(t *testing.T) {
	h := &History{Namespace: "default", Name: "x"}
	h.Start(gen("a"), t0)
	h.Start(gen("b"), t0.Add(time.Second))
	if h.Target() != nil {
		t.Fatal("a was never Ready: nothing to roll back to")
	}
	h.Fail("b", t0.Add(time.Hour), "not Ready", nil, "", nil)
	if h.Rejected != nil {
		t.Fatal("a failure without a target rejects nothing")
	}
	if st := h.Status(0); st.State != StateFailed {
		t.Fatalf("status %+v", st)
	}
	// A manifest too large to keep cannot be a target either.
	big := gen("c")
	big.Manifest = strings.Repeat("x", MaxManifest+1)
	h.Start(big, t0)
	if h.Current().Manifest != "" {
		t.Fatal("a manifest larger than MaxManifest was kept")
	}
}

func TestBounds(t *testing.T) {
	h := &History{Namespace: "default", Name: "x"}
	for i := range MaxGenerations + 5 {
		h.Start(gen(string(rune('a'+i))), t0.Add(time.Duration(i)*time.Second))
	}
	if len(h.Generations) != MaxGenerations {
		t.Fatalf("%d generations kept", len(h.Generations))
	}
	h.Fail(h.Current().UID, t0, strings.Repeat("é", MaxReason), nil, "", nil)
	if r := h.Current().Reason; len(r) > MaxReason || !strings.HasSuffix(r, "(cut)") {
		t.Fatalf("reason of %d bytes: %q...", len(r), r[:20])
	}
	// A restart mid-rollout keeps the generation's start, so its deadline.
	if h.Start(gen(h.Current().UID), t0.Add(time.Hour)) {
		t.Fatal("the current generation started again")
	}
}

func TestUndo(t *testing.T) {
	h := &History{Namespace: "default", Name: "x"}
	if _, err := h.Undo(t0); err == nil {
		t.Fatal("undo of nothing")
	}
	h.Start(gen("a"), t0)
	h.Ready("a", t0, nil)
	h.Start(gen("b"), t0)
	h.Ready("b", t0, nil)
	g, err := h.Undo(t0)
	if err != nil || g.UID != "a" {
		t.Fatalf("undo: %v, %+v", err, g)
	}
	if h.Rejected == nil || h.Rejected.UID != "b" || h.Rejected.By != ByUndo {
		t.Fatalf("rejected %+v", h.Rejected)
	}
	a := gen("a")
	a.RollbackOf = "b"
	h.Start(a, t0)
	// No earlier Ready generation left but the one undone.
	if _, err := h.Undo(t0); err == nil {
		t.Fatal("undo back to the undone generation")
	}
}

func TestStoreRoundTripAndDamage(t *testing.T) {
	s := NewStore(t.TempDir())
	h, err := s.Load("kube-system", "etcd-n1")
	if err != nil || len(h.Generations) != 0 {
		t.Fatalf("missing history: %v %+v", err, h)
	}
	h.Start(gen("a"), t0)
	h.Ready("a", t0, map[string]string{"etcd": "sha256:aaa"})
	if err := s.Save(h); err != nil {
		t.Fatal(err)
	}
	got, err := s.Load("kube-system", "etcd-n1")
	if err != nil || got.Current().Images["etcd"] != "sha256:aaa" || !got.Current().ReadyAt.Equal(t0) {
		t.Fatalf("read back: %v %+v", err, got)
	}
	file := filepath.Join(s.Dir(), "kube-system_etcd-n1.json")
	b, _ := os.ReadFile(file)
	for name, data := range map[string][]byte{
		"truncated": b[:len(b)/2],
		"garbage":   []byte("\x00\xff{{{"),
		"other pod": []byte(strings.Replace(string(b), `"etcd-n1"`, `"other"`, 1)),
		"too many":  []byte(`{"namespace":"kube-system","name":"etcd-n1","generations":[` + strings.Repeat(`{"uid":"u"},`, MaxGenerations) + `{"uid":"u"}]}`),
		"dangling":  []byte(`{"namespace":"kube-system","name":"etcd-n1","generations":[{"uid":"a"}],"rejected":{"uid":"b","target":"a"}}`),
	} {
		if err := os.WriteFile(file, data, 0o600); err != nil {
			t.Fatal(err)
		}
		h, err := s.Load("kube-system", "etcd-n1")
		if err == nil || !strings.Contains(err.Error(), file) {
			t.Errorf("%s: error %v, want one naming %s", name, err, file)
		}
		if h == nil || len(h.Generations) != 0 || h.Name != "etcd-n1" {
			t.Errorf("%s: history %+v, want an empty one", name, h)
		}
	}
	// Larger than any history written: refused without being read whole.
	f, _ := os.Create(file)
	_ = f.Truncate(maxFile + 10)
	f.Close()
	if _, err := s.Load("kube-system", "etcd-n1"); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Errorf("huge file: %v", err)
	}
	// A FIFO or a device in its place is refused without being opened for
	// reading: a FIFO without a writer would hang the reconcile loop.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(file, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Load("kube-system", "etcd-n1"); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("FIFO: %v", err)
	}
	for _, bad := range [][2]string{{"..", "x"}, {"a/b", "x"}, {"default", "../../etc"}, {"", "x"}, {"default", "x_y"}} {
		if _, err := s.Load(bad[0], bad[1]); err == nil {
			t.Errorf("name %q/%q taken as a path", bad[0], bad[1])
		}
	}
}

// A generation Ready once and judged at its deadline passes; then it has no
// deadline any more, and its status is ready.
func TestPass(t *testing.T) {
	h := &History{Namespace: "default", Name: "x"}
	h.Start(gen("a"), t0)
	if h.Pass("a", t0) {
		t.Fatal("passed without being Ready")
	}
	h.Ready("a", t0.Add(time.Second), nil)
	if st := h.Status(time.Minute); st.State != StateProgressing {
		t.Fatalf("Ready before its deadline: %+v, want progressing", st)
	}
	if !h.Pass("a", t0.Add(time.Minute)) || !h.Deadline("a", time.Minute).IsZero() {
		t.Fatal("not passed")
	}
	if st := h.Status(time.Minute); st.State != StateReady || st.Failed() {
		t.Fatalf("status %+v", st)
	}
	if Settle(90*time.Second) != 10*time.Second || Settle(6*time.Second) != 2*time.Second {
		t.Fatal("settle")
	}
}

// A rejection holds for its manifest under any UID, and lifts when the
// manifest changes.
func TestRejectionFollowsTheManifest(t *testing.T) {
	h := History{Rejected: &Rejected{UID: "b", Target: "a", By: ByDeadline, Content: "m-b"}}
	if r, changed := h.Offered("b-restarted", "m-b"); r == nil || changed {
		t.Fatalf("the rejected manifest under a new UID lifted the rejection: %v %v", r, changed)
	}
	if r, changed := h.Offered("c", "m-c"); r != nil || !changed || h.Rejected != nil {
		t.Fatalf("a new manifest did not lift the rejection: %v %v %+v", r, changed, h.Rejected)
	}
}
