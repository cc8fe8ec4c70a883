package agent

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/podspec"
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
