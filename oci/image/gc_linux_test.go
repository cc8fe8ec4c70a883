package image

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// importPadded imports an image named ref whose one layer holds size bytes of
// its own, and returns it.
func importPadded(t *testing.T, s *Store, ref string, size int) Image {
	t.Helper()
	body := strings.Repeat(ref, size/len(ref))
	p := filepath.Join(t.TempDir(), "img.tar")
	writeDockerArchive(t, p, map[string]v1.Image{ref: testImage(t, []entry{{name: "pad", body: body}})})
	imgs, err := s.Import(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	return imgs[0]
}

func storeRefs(t *testing.T, s *Store) []string {
	t.Helper()
	imgs, err := s.List()
	if err != nil {
		t.Fatal(err)
	}
	var refs []string
	for _, img := range imgs {
		refs = append(refs, img.Refs...)
	}
	slices.Sort(refs)
	return refs
}

// Image GC on a small real filesystem filled past the high threshold removes
// the unused images least recently used first, down to the low threshold, and
// never one a manifest names, a container is made of, one pinned, one the
// import folder holds or one younger than the minimum age.
func TestGarbageCollectLoopFS(t *testing.T) {
	testroot.Require(t)
	mnt := filepath.Join(t.TempDir(), "disk")
	testroot.LoopFS(t, mnt, 96<<20)
	s, err := Open(filepath.Join(mnt, "images"), discardLogger(), WithReserve(0))
	if err != nil {
		t.Fatal(err)
	}
	importDir := filepath.Join(mnt, "import")
	os.MkdirAll(importDir, 0o700)
	const mib = 1 << 20
	imgs := map[string]Image{}
	// Imported in this order; used (containers made of them) in another.
	for _, name := range []string{"aold", "bmid", "cnew", "dmanifest", "esnap", "fpinned", "gfolder", "hyoung"} {
		imgs[name] = importPadded(t, s, "example.com/"+name+":v1", 8*mib)
	}
	now := time.Now()
	// The young one was imported a second ago; the others an hour ago.
	idx, err := s.readIndex()
	if err != nil {
		t.Fatal(err)
	}
	for i := range idx.Images {
		idx.Images[i].Imported = now.Add(-time.Hour)
		if idx.Images[i].ID == imgs["hyoung"].ID {
			idx.Images[i].Imported = now.Add(-time.Second)
		}
	}
	if err := s.writeIndexLocked(idx); err != nil {
		t.Fatal(err)
	}
	// Last uses: cnew used most recently, aold least; bmid between.
	for name, ago := range map[string]time.Duration{"aold": 50 * time.Minute, "bmid": 30 * time.Minute, "cnew": 10 * time.Minute} {
		if err := s.touch(imgs[name].ID, now.Add(-ago)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := s.Prepare("esnap-ctr", "example.com/esnap:v1"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Release("esnap-ctr") })
	if _, err := s.Pin("example.com/fpinned:v1", true); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(importDir, "g.tar"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := s.writeImportState(map[string]importedFile{"g.tar": {Images: []string{imgs["gfolder"].ID}}}); err != nil {
		t.Fatal(err)
	}
	keep := []string{"example.com/dmanifest:v1"}
	policy := GCPolicy{HighThresholdPercent: 60, LowThresholdPercent: 40, MinAge: 2 * time.Minute}

	// Under the high threshold: nothing to do, however old.
	res, err := s.GarbageCollect(GCPolicy{HighThresholdPercent: 95, LowThresholdPercent: 90, MinAge: 2 * time.Minute}, keep, importDir, now, now)
	if err != nil || len(res.Removed) > 0 {
		t.Fatalf("under the high threshold: %+v, %v; want nothing removed", res, err)
	}

	// Fill to 75%: freeing down to 40% wants all three unused images and
	// more, so the young one would go too if its age did not keep it.
	_, size, _ := statfs(s.Root())
	fillTo(t, mnt, size, 75)
	res, err = s.GarbageCollect(policy, keep, importDir, now, now)
	t.Logf("removed %v, freed %d, wanted %d, err %v", res.Removed, res.Freed, res.Wanted, err)
	if err == nil || !strings.Contains(err.Error(), "freed") {
		t.Errorf("GC that cannot reach the low threshold: err = %v, want one saying what it freed", err)
	}
	want := []string{imgs["aold"].ID, imgs["bmid"].ID, imgs["cnew"].ID}
	if !slices.Equal(res.Removed, want) {
		t.Errorf("removed %v, want LRU order %v", res.Removed, want)
	}
	got := storeRefs(t, s)
	for _, name := range []string{"dmanifest", "esnap", "fpinned", "gfolder", "hyoung"} {
		if !slices.Contains(got, "example.com/"+name+":v1") {
			t.Errorf("%s removed; left: %v", name, got)
		}
	}
	for _, name := range []string{"aold", "bmid", "cnew"} {
		if _, err := os.Stat(s.usedPath(imgs[name].ID)); !os.IsNotExist(err) {
			t.Errorf("last-use record of removed %s left: %v", name, err)
		}
		if s.hasLayer(imgs[name].Layers[0]) {
			t.Errorf("layer of removed %s left", name)
		}
	}
	// The snapshot's and the manifest's images were found in use now.
	for _, name := range []string{"dmanifest", "esnap"} {
		if lu := s.LastUsed(imgs[name].ID); !lu.Equal(now.UTC()) && !lu.Equal(now) {
			t.Errorf("last use of %s = %v, want %v", name, lu, now)
		}
	}

	// Two minutes on, the young one is old enough and goes; pinned stays.
	later := now.Add(3 * time.Minute)
	fillTo(t, mnt, size, 75)
	res, _ = s.GarbageCollect(policy, keep, importDir, now, later)
	if !slices.Equal(res.Removed, []string{imgs["hyoung"].ID}) {
		t.Errorf("later: removed %v, want only hyoung", res.Removed)
	}
	// Unpinned and its archive gone from the folder, the pinned and the
	// folder's images go; the manifest's and the container's stay.
	if _, err := s.Pin(imgs["fpinned"].ID, false); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(importDir, "g.tar"))
	freed, removed, err := s.RemoveUnused(keep, importDir)
	if err != nil || len(removed) != 2 || freed < 16<<20 {
		t.Errorf("reclaim after unpin: removed %v (%d bytes), %v; want fpinned and gfolder", removed, freed, err)
	}
	if got := storeRefs(t, s); !slices.Equal(got, []string{"example.com/dmanifest:v1", "example.com/esnap:v1"}) {
		t.Errorf("left %v, want the manifest's and the container's", got)
	}
}

// fillTo writes a file in dir until the filesystem of size bytes is percent
// full.
func fillTo(t *testing.T, dir string, size uint64, percent int) {
	t.Helper()
	free, _, err := statfs(dir)
	if err != nil {
		t.Fatal(err)
	}
	used := size - free
	target := size * uint64(percent) / 100
	if used >= target {
		return
	}
	f, err := os.Create(filepath.Join(dir, fmt.Sprintf("fill-%d", time.Now().UnixNano())))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for n := target - used; n > 0; {
		k := min(n, uint64(len(buf)))
		if _, err := f.Write(buf[:k]); err != nil {
			t.Fatal(err)
		}
		n -= k
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
}

// MaxAge removes an unused image not used for that long whatever the usage,
// but only once the collector itself has run that long.
func TestGarbageCollectMaxAge(t *testing.T) {
	s := openStore(t)
	p := filepath.Join(t.TempDir(), "img.tar")
	writeDockerArchive(t, p, map[string]v1.Image{"example.com/a:v1": testImage(t)})
	imgs, err := s.Import(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := s.touch(imgs[0].ID, now.Add(-2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	policy := GCPolicy{HighThresholdPercent: 100, LowThresholdPercent: 100, MaxAge: time.Hour}
	if res, err := s.GarbageCollect(policy, nil, t.TempDir(), now.Add(-time.Minute), now); err != nil || len(res.Removed) != 0 {
		t.Fatalf("collector up a minute: %+v %v, want nothing removed", res, err)
	}
	if _, err := s.Pin("example.com/a:v1", true); err != nil {
		t.Fatal(err)
	}
	if res, err := s.GarbageCollect(policy, nil, t.TempDir(), now.Add(-2*time.Hour), now); err != nil || len(res.Removed) != 0 {
		t.Fatalf("pinned: %+v %v, want nothing removed", res, err)
	}
	if _, err := s.Pin("example.com/a:v1", false); err != nil {
		t.Fatal(err)
	}
	res, err := s.GarbageCollect(policy, nil, t.TempDir(), now.Add(-2*time.Hour), now)
	if err != nil || !slices.Equal(res.Removed, []string{imgs[0].ID}) {
		t.Fatalf("unused for 2h, MaxAge 1h: %+v %v, want it removed", res, err)
	}
}

// Pins are kept across a re-import of the same image, and shown by List.
func TestPinSurvivesReimport(t *testing.T) {
	s := openStore(t)
	p := filepath.Join(t.TempDir(), "img.tar")
	writeDockerArchive(t, p, map[string]v1.Image{"example.com/a:v1": testImage(t)})
	if _, err := s.Import(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Pin("example.com/a:v1", true); err != nil {
		t.Fatal(err)
	}
	first, _ := s.Get("example.com/a:v1")
	if _, err := s.Import(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	img, err := s.Get("example.com/a:v1")
	if err != nil || !img.Pinned {
		t.Fatalf("after re-import: %+v %v, want pinned", img, err)
	}
	if !img.Imported.Equal(first.Imported) || img.Imported.IsZero() {
		t.Errorf("imported %v, want the first import's %v", img.Imported, first.Imported)
	}
	if _, err := s.Pin("example.com/nothere:v1", true); err == nil {
		t.Error("pinning a missing image succeeded")
	}
}
