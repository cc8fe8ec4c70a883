package image

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

func importFixture(t *testing.T, s *Store, refs map[string]v1.Image) {
	t.Helper()
	p := filepath.Join(t.TempDir(), "fixture.tar")
	writeDockerArchive(t, p, refs)
	if _, err := s.Import(context.Background(), p); err != nil {
		t.Fatal(err)
	}
}

func TestRemove(t *testing.T) {
	testroot.Require(t)
	s := openStore(t)
	importFixture(t, s, map[string]v1.Image{"app:full": testImage(t), "app:base": testImage(t, baseEntries)})
	full, err := s.Get("app:full")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Remove("app:full"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("app:full"); !errors.Is(err, podspec.ErrImageNotPresent) {
		t.Errorf("Get after Remove: %v, want ErrImageNotPresent", err)
	}
	if !s.hasLayer(full.Layers[0]) || s.hasLayer(full.Layers[1]) {
		t.Errorf("after Remove: shared base layer present=%v (want true), own top layer present=%v (want false)",
			s.hasLayer(full.Layers[0]), s.hasLayer(full.Layers[1]))
	}
	if err := s.Remove("app:full"); !errors.Is(err, podspec.ErrImageNotPresent) {
		t.Errorf("second Remove: %v, want ErrImageNotPresent", err)
	}
	if err := s.Remove("docker.io/library/app:base"); err != nil {
		t.Fatal(err)
	}
	if n := countDir(t, s.layersDir()) + countDir(t, s.linksDir()); n != 0 {
		t.Errorf("%d layer dirs and links left, want 0", n)
	}
	if imgs, err := s.List(); err != nil || len(imgs) != 0 {
		t.Errorf("List = %v, %v; want nothing", imgs, err)
	}
}

func mountedUnder(t *testing.T, dir string) []string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var found []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.HasPrefix(f[4], dir) {
			found = append(found, f[4])
		}
	}
	return found
}

func TestPrepareRelease(t *testing.T) {
	testroot.Require(t)
	s := openStore(t)
	importFixture(t, s, map[string]v1.Image{"app:v1": testImage(t)})
	rootfs, img, err := s.Prepare("c1", "app:v1")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Release("c1") })
	if img.Config.Cmd[0] != "sh" {
		t.Errorf("Prepare returned image config %+v", img.Config)
	}
	if m := mountedUnder(t, rootfs); len(m) != 1 {
		t.Fatalf("mounts at %s: %v, want one", rootfs, m)
	}
	for _, gone := range []string{"gone.txt", "opaque/old.txt"} {
		if _, err := os.Lstat(filepath.Join(rootfs, gone)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s visible in rootfs (%v), want whited out", gone, err)
		}
	}
	for file, want := range map[string]string{"opaque/new.txt": "new", "bin/tool": "#!/bin/sh\necho tool\n"} {
		if b, err := os.ReadFile(filepath.Join(rootfs, file)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", file, b, err, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(rootfs, "etc/passwd")); !strings.Contains(string(b), "nobody") {
		t.Errorf("etc/passwd from the top layer not visible: %q", b)
	}
	if err := os.WriteFile(filepath.Join(rootfs, "etc/passwd"), []byte("changed"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(s.layerDir(img.Layers[1]), "etc/passwd")); string(b) == "changed" {
		t.Error("a write in the container reached the image layer")
	}

	// A second container of the same image starts from the image, not from c1's writes.
	rootfs2, _, err := s.Prepare("c2", "app:v1")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(rootfs2, "etc/passwd")); string(b) == "changed" {
		t.Error("c2 sees c1's write")
	}
	if err := s.Release("c2"); err != nil {
		t.Fatal(err)
	}

	// Removing the image under a running container keeps its layers until release.
	if err := s.Remove("app:v1"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.ReadFile(filepath.Join(rootfs, "opaque/new.txt")); err != nil {
		t.Errorf("rootfs broken after image removal: %v", err)
	}
	if keys, err := s.Snapshots(); err != nil || len(keys) != 1 || keys[0] != "c1" {
		t.Errorf("Snapshots = %v, %v; want [c1]", keys, err)
	}
	if err := s.Release("c1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Release("c1"); err != nil {
		t.Errorf("second Release: %v", err)
	}
	if m := mountedUnder(t, s.Root()); len(m) != 0 {
		t.Errorf("mounts left under the store: %v", m)
	}
	if n := countDir(t, s.layersDir()) + countDir(t, s.snapshotsDir()); n != 0 {
		t.Errorf("%d layer and snapshot dirs left after release, want 0", n)
	}
}

// A snapshot's meta.json is whole on disk before its rename, and renamed
// before the rootfs is mounted; its name is not fsynced (a snapshot without
// one is half made, as TestReleaseHalfMadeSnapshot releases it, and a power
// cut leaves nothing mounted): one wait on the disk, not two, before the
// container can run.
func TestSnapshotMetaWholeBeforeItsMount(t *testing.T) {
	testroot.Require(t)
	s := openStore(t)
	importFixture(t, s, map[string]v1.Image{"app:v1": testImage(t)})
	var mu sync.Mutex
	var steps []atomicfile.Step
	mountedAtRename := false
	defer atomicfile.SetTestHook(func(st atomicfile.Step, path string) {
		if filepath.Base(path) != "meta.json" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		steps = append(steps, st)
		if st == atomicfile.Renamed {
			mountedAtRename, _ = isMountPoint(filepath.Join(filepath.Dir(path), "rootfs"))
		}
	})()
	before := time.Now()
	rootfs, img, err := s.Prepare("c1", "app:v1")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release("c1")
	// Made while meta.json's content waited on the disk: the image's last
	// use, for image GC, and the overlay's directories.
	if lu := s.LastUsed(img.ID); lu.Before(before.Add(-time.Second)) {
		t.Errorf("the image's last use %v, want the Prepare's (%v)", lu, before)
	}
	for _, d := range []string{"upper", "work", "empty"} {
		if fi, err := os.Stat(filepath.Join(s.snapshotDir("c1"), d)); err != nil || !fi.IsDir() {
			t.Errorf("the snapshot's %s: %v", d, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []atomicfile.Step{atomicfile.Created, atomicfile.Written, atomicfile.Synced, atomicfile.Renamed}; !slices.Equal(steps, want) {
		t.Errorf("meta.json's steps %v, want %v", steps, want)
	}
	if mountedAtRename {
		t.Error("the rootfs was mounted before meta.json was renamed")
	}
	if m, _ := isMountPoint(rootfs); !m {
		t.Error("the rootfs is not mounted")
	}
}

func TestReleaseHalfMadeSnapshot(t *testing.T) {
	testroot.Require(t)
	s := openStore(t)
	if err := os.MkdirAll(filepath.Join(s.snapshotsDir(), "half", "upper"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := s.Release("half"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(s.snapshotsDir(), "half")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("half-made snapshot left: %v", err)
	}
	if _, _, err := s.Prepare("c", "missing:v1"); !errors.Is(err, podspec.ErrImageNotPresent) {
		t.Errorf("Prepare of a missing image: %v, want ErrImageNotPresent", err)
	}
	if _, _, err := s.Prepare("../escape", "app"); err == nil {
		t.Error("Prepare accepted key ../escape")
	}
}

// Prepares of many keys run side by side (a burst of starts) and of the
// same key at once: each key gets one mounted rootfs of the image, the
// layer links made by whichever came first; a removal of the image after
// them keeps the layers their snapshots use, until their Releases, side by
// side too, are done.
func TestPrepareConcurrent(t *testing.T) {
	testroot.Require(t)
	s := openStore(t)
	importFixture(t, s, map[string]v1.Image{"app:v1": testImage(t)})
	// The links are made by the first Prepare: make them race.
	if err := os.RemoveAll(filepath.Join(s.root, "l")); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(s.root, "l"), 0o755); err != nil {
		t.Fatal(err)
	}
	const keys = 12
	errs := make(chan error, 2*keys+1)
	var wg sync.WaitGroup
	for i := range 2 * keys { // every key twice at once
		key := fmt.Sprintf("c%d", i%keys)
		wg.Go(func() {
			rootfs, _, err := s.Prepare(key, "app:v1")
			if err == nil {
				_, err = os.Stat(filepath.Join(rootfs, "bin/tool"))
			}
			errs <- err
		})
	}
	wg.Wait()
	errs <- s.Remove("app:v1")
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for i := range keys {
		key := fmt.Sprintf("c%d", i)
		rootfs := filepath.Join(s.snapshotDir(key), "rootfs")
		if m := mountedUnder(t, rootfs); len(m) != 1 {
			t.Errorf("%s: mounts %v, want one", key, m)
		}
		if b, err := os.ReadFile(filepath.Join(rootfs, "bin/tool")); err != nil || string(b) != "#!/bin/sh\necho tool\n" {
			t.Errorf("%s: bin/tool = %q, %v", key, b, err)
		}
	}
	// Released side by side: the last one out deletes the removed image's
	// layers.
	relErrs := make(chan error, keys)
	for i := range keys {
		wg.Go(func() { relErrs <- s.Release(fmt.Sprintf("c%d", i)) })
	}
	wg.Wait()
	close(relErrs)
	for err := range relErrs {
		if err != nil {
			t.Error(err)
		}
	}
	if m := mountedUnder(t, s.snapshotsDir()); len(m) != 0 {
		t.Errorf("mounts left: %v", m)
	}
	if layers, _ := os.ReadDir(s.layersDir()); len(layers) != 0 {
		t.Errorf("%d layers left once the removed image's snapshots are released", len(layers))
	}
}

// A container starts from the image ID the agent pulled and verified; a
// reference spelt like that ID ("sha256:<hex>" is repository
// docker.io/library/sha256, tag <hex>), which a pod or an archive may give
// an image of its own, does not stand in for it.
func TestPrepareByIDIsNotAName(t *testing.T) {
	testroot.Require(t)
	s := openStore(t)
	victim := testImage(t)
	id, err := victim.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	importFixture(t, s, map[string]v1.Image{"registry.example/app:v1": victim, id.String(): testImage(t, baseEntries)})
	_, img, err := s.Prepare("c1", id.String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Release("c1") })
	if img.ID != id.String() {
		t.Fatalf("Prepare(%s) started image %s (refs %v), not the image of that ID", id, img.ID, img.Refs)
	}
}
