package bundle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"
)

// A bundle applied while the current one is still on trial (never Ready
// yet) is rolled back, if it fails, to the last bundle that was kept, not
// to the one on trial: that one would come back with no trial at all,
// and the good one would have been released.
func TestApplyDuringTrialKeepsTheLastKept(t *testing.T) {
	ctx := context.Background()
	k := newKey(t)
	pol := requiring(t, k)
	root := t.TempDir()
	store := openStore(t, root, pol)
	apply := func(i int, ref string, after time.Duration) Record {
		t.Helper()
		archive, _ := signedArchive(t, k, ref)
		path, _ := create(t, k, fmt.Sprintf("gen%d", i), map[string][]byte{"pod.yaml": []byte(ref)}, []string{ref}, archive)
		rec, err := Apply(ctx, store, pol, path, root, ApplyOptions{RollbackAfter: after})
		if err != nil {
			t.Fatal(err)
		}
		return rec
	}
	good := apply(0, "example.com/a:1", time.Minute)
	// The daemon's trial kept it.
	if err := WriteState(root, State{Current: Hex(good.Digest)}); err != nil {
		t.Fatal(err)
	}
	onTrial := apply(1, "example.com/b:1", time.Minute)
	next := apply(2, "example.com/c:1", time.Minute)
	st, err := ReadState(root)
	if err != nil {
		t.Fatal(err)
	}
	if st.Current != Hex(next.Digest) || st.Previous != Hex(good.Digest) {
		t.Errorf("state %+v: want current %s and, to roll back to, the kept %s (not %s, on trial)", st, next.Digest, good.Digest, onTrial.Digest)
	}
	if _, err := os.Stat(RecordDir(root, Hex(good.Digest))); err != nil {
		t.Errorf("the kept bundle's record: %v", err)
	}
	if _, err := os.Stat(RecordDir(root, Hex(onTrial.Digest))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the bundle replaced on trial still has its record: %v", err)
	}
	if img, err := store.Get("example.com/a:1"); err != nil || !img.Pinned {
		t.Errorf("the kept bundle's image: pinned %v, %v; want pinned", img.Pinned, err)
	}
}
