package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/agent/source"
)

// A pod's records (seen, started) are written while its first container
// starts: the start does not wait for their fsyncs, which would come before
// its container could run. The sync that started it waits for them before
// it does anything else: a removal of the pod meanwhile tears it down only
// once they are written, and leaves no pods/<uid> behind (the records'
// writes would make it again).
func TestRecordsWrittenWhileTheContainerStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		paths := manifest.Paths{RootDir: t.TempDir()}
		rt := newFakeRuntime()
		rt.rootDir = paths.RootDir
		started := make(chan struct{})
		var once sync.Once
		rt.onStart = func(*podspec.Container) { once.Do(func() { close(started) }) }
		release := make(chan struct{})
		var released sync.Once
		t.Cleanup(func() { released.Do(func() { close(release) }) }) // a failure lets the writes end
		var held sync.Once
		defer atomicfile.SetSyncFault(func(p string) error {
			if strings.Contains(filepath.Base(p), ".seen.tmp-") {
				// The records' fsync waits for the container's start
				// (a start that waited for the records never comes),
				// then for the test.
				held.Do(func() {
					<-started
					<-release
				})
			}
			return nil
		})()
		h := start(t, rt, Config{Paths: paths, Seen: NewSeenStore(paths)})
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("main", "busybox"))
		h.send([]manifest.Pod{pod})
		if !slices.Contains(rt.Calls(), "start u1/main#0") {
			t.Fatalf("calls %q: the container did not start while its pod's records were written", rt.Calls())
		}
		seen := filepath.Join(paths.RootDir, "pods", "u1", "seen")
		if _, err := os.Stat(seen); err == nil {
			t.Fatal("seen written before its fsync returned")
		}
		h.send(nil) // the manifest removed
		if slices.Contains(rt.Calls(), "rmsandbox u1") {
			t.Fatalf("calls %q: the pod torn down while its records were written", rt.Calls())
		}
		released.Do(func() { close(release) })
		synctest.Wait()
		if !slices.Contains(rt.Calls(), "rmsandbox u1") {
			t.Errorf("calls %q: the pod not torn down once its records were written", rt.Calls())
		}
		if left, err := os.ReadDir(filepath.Join(paths.RootDir, "pods", "u1")); !os.IsNotExist(err) {
			t.Errorf("pods/u1 left after the pod was removed: %v, %v", left, err)
		}
	})
}

// A daemon killed between a pod's sandbox and its records (written while the
// pod's first container starts) leaves the pod running without them: the
// next daemon adopts it and writes them, its start time the one its
// containers say, and the manifest its source offers; records that exist
// are kept.
func TestAdoptedPodGetsItsMissingRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		paths := manifest.Paths{RootDir: t.TempDir()}
		rt := newFakeRuntime()
		pod := testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))
		started := time.Now().Add(-time.Hour)
		rt.adopt(podspec.ContainerStatus{ID: "old-a", PodUID: "u1", PodName: "web-node1", Name: "a",
			Hash: hashOf(&pod.Spec.Containers[0]), Image: "busybox", State: podspec.StateRunning, StartedAt: started, CreatedAt: started})
		store := NewSeenStore(paths)
		store.Offer(manifest.SourceFile, []source.Manifest{{UID: "u1", Source: manifest.SourceFile, Origin: "/m/web.yaml", Data: []byte("kind: Pod")}})
		h := start(t, rt, Config{Paths: paths, Seen: store})
		h.send([]manifest.Pod{pod})
		if got := rt.Calls("start", "sandbox"); len(got) != 0 {
			t.Fatalf("adopted pod touched: %q", got)
		}
		if got := NewSeenStore(paths).Started("u1", time.Now()); !got.Equal(started) {
			t.Errorf("start time recorded for the adopted pod = %v, want its container's %v", got, started)
		}
		if _, err := os.Stat(filepath.Join(paths.RootDir, "pods", "u1", "seen")); err != nil {
			t.Errorf("seen of the adopted pod: %v", err)
		}
		if kept := NewSeenStore(paths).Stored(manifest.SourceFile); len(kept) != 1 || string(kept[0].Data) != "kind: Pod" {
			t.Errorf("manifest kept for the adopted pod: %+v", kept)
		}
	})
}

// A sandbox found at the daemon's start with no container in it may never
// have had its volumes prepared (a Secret that had not come, or a daemon
// killed between the two): the pod's first start prepares them, as for a
// sandbox made now, and its records are written then, not at adoption.
func TestAdoptedEmptySandboxPreparesItsVolumes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		paths := manifest.Paths{RootDir: t.TempDir()}
		rt := newFakeRuntime()
		rt.sandboxes["u1"] = true
		h := start(t, rt, Config{Paths: paths, Seen: NewSeenStore(paths)})
		h.send([]manifest.Pod{testPod("web", "u1", v1.RestartPolicyAlways, ctr("a", "busybox"))})
		want := []string{"sandbox u1", "volumes u1", "start u1/a#0"}
		if got := rt.Calls("sandbox", "volumes", "start"); !slices.Equal(got, want) {
			t.Fatalf("calls = %q, want %q", got, want)
		}
		if _, err := os.Stat(filepath.Join(paths.RootDir, "pods", "u1", "started")); err != nil {
			t.Errorf("started record: %v", err)
		}
	})
}
