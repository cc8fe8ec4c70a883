package agent

import (
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/atomicfile"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/source"
)

// The records a pod is restored from after a crash (seen, started,
// manifest.json) are written through atomicfile, each fsynced and its
// directory fsynced after the rename, so that a power cut loses none that
// was written.
func TestSeenRecordsAreDurable(t *testing.T) {
	paths := manifest.Paths{RootDir: t.TempDir()}
	var mu sync.Mutex
	steps := map[string][]atomicfile.Step{}
	defer atomicfile.SetTestHook(func(s atomicfile.Step, path string) {
		if strings.HasPrefix(path, paths.RootDir) {
			mu.Lock()
			steps[filepath.Base(path)] = append(steps[filepath.Base(path)], s)
			mu.Unlock()
		}
	})()
	store := NewSeenStore(paths)
	store.Offer(manifest.SourceFile, []source.Manifest{{UID: "u1", Source: manifest.SourceFile, Origin: "/m/a.yaml", Data: []byte("x")}})
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Annotations: map[string]string{manifest.AnnotationSeen: time.Now().Format(time.RFC3339Nano)}}}
	if err := store.Record(pod, time.Now()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, name := range []string{"seen", "started", "manifest.json"} {
		got := steps[name]
		var synced, dirSynced int
		for _, s := range got {
			synced += map[bool]int{true: 1}[s == atomicfile.Synced]
			dirSynced += map[bool]int{true: 1}[s == atomicfile.DirSynced]
		}
		if synced != 1 || dirSynced != 1 {
			t.Errorf("%s: steps %v; want it fsynced once and its directory once", name, got)
		}
	}
}
