package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
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
	// Made as a pod's volumes make it, before its records: its name, and
	// pods/'s, are made durable with the records all the same.
	if err := os.MkdirAll(filepath.Join(paths.RootDir, "pods", "u1"), 0o700); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	steps := map[string][]atomicfile.Step{}
	defer atomicfile.SetTestHook(func(s atomicfile.Step, path string) {
		if strings.HasPrefix(path, paths.RootDir) {
			mu.Lock()
			steps[strings.TrimPrefix(path, paths.RootDir+"/")] = append(steps[strings.TrimPrefix(path, paths.RootDir+"/")], s)
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
	for _, dir := range []string{"pods", "pods/u1"} {
		if fmt.Sprint(steps[dir]) != fmt.Sprint([]atomicfile.Step{atomicfile.ParentSynced}) {
			t.Errorf("%s: steps %v; want its parent fsynced", dir, steps[dir])
		}
	}
	for _, name := range []string{"seen", "started", "manifest.json"} {
		got := steps["pods/u1/"+name]
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

// A record that cannot be written (here manifest.json, past a file size
// limit) keeps none of the others from being written: seen and started
// are written alone when the three cannot be written together, and the
// error names the one that failed.
func TestRecordWritesTheOthersWhenOneFails(t *testing.T) {
	paths := manifest.Paths{RootDir: t.TempDir()}
	store := NewSeenStore(paths)
	big := make([]byte, 9<<20)
	store.Offer(manifest.SourceFile, []source.Manifest{{UID: "u1", Source: manifest.SourceFile, Origin: "/m/a.yaml", Data: big}})
	seen := time.Date(2026, 12, 7, 9, 0, 0, 0, time.UTC)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Annotations: map[string]string{manifest.AnnotationSeen: seen.Format(time.RFC3339Nano)}}}
	restore := limitFileSize(t, 8<<20)
	err := store.Record(pod, seen.Add(time.Second))
	restore()
	if err == nil || !strings.Contains(err.Error(), "keep the manifest of pod u1") {
		t.Errorf("Record: %v; want the manifest's failure", err)
	}
	if got := store.Seen("u1"); !got.Equal(seen) {
		t.Errorf("seen %v, want %v", got, seen)
	}
	if got := store.Started("u1", time.Time{}); !got.Equal(seen.Add(time.Second)) {
		t.Errorf("started %v, want %v", got, seen.Add(time.Second))
	}
	if _, ok := store.stored("u1"); ok {
		t.Error("a manifest.json was kept past the file size limit")
	}
}

// An fsync that fails (the disk said EIO) fails Record with it, and the
// records are not written again one by one: after a failed fsync a write
// again proves nothing (Linux may have marked the failed pages clean).
func TestRecordReportsAFailedFsync(t *testing.T) {
	paths := manifest.Paths{RootDir: t.TempDir()}
	store := NewSeenStore(paths)
	defer atomicfile.SetSyncFault(func(p string) error {
		if strings.Contains(filepath.Base(p), ".seen.tmp-") {
			return syscall.EIO
		}
		return nil
	})()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Annotations: map[string]string{manifest.AnnotationSeen: time.Now().Format(time.RFC3339Nano)}}}
	err := store.Record(pod, time.Now())
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "record seen, started of pod u1") {
		t.Errorf("Record: %v; want the failed fsync, naming the records", err)
	}
	if got := store.Started("u1", time.Time{}); !got.IsZero() {
		t.Errorf("started written again after the failed fsync: %v", got)
	}
}

// In the one-by-one fallback too, an fsync that fails stops the writes:
// manifest.json past a file size limit sends Record to the fallback, where
// seen's fsync fails; started is not written after it.
func TestRecordFallbackStopsAtAFailedFsync(t *testing.T) {
	paths := manifest.Paths{RootDir: t.TempDir()}
	store := NewSeenStore(paths)
	store.Offer(manifest.SourceFile, []source.Manifest{{UID: "u1", Source: manifest.SourceFile, Origin: "/m/a.yaml", Data: make([]byte, 9<<20)}})
	defer atomicfile.SetSyncFault(func(p string) error {
		if strings.Contains(filepath.Base(p), ".seen.tmp-") {
			return syscall.EIO
		}
		return nil
	})()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Annotations: map[string]string{manifest.AnnotationSeen: time.Now().Format(time.RFC3339Nano)}}}
	restore := limitFileSize(t, 8<<20)
	err := store.Record(pod, time.Now())
	restore()
	if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "keep the manifest of pod u1") {
		t.Errorf("Record: %v; want the manifest's failure and seen's failed fsync", err)
	}
	if got := store.Started("u1", time.Time{}); !got.IsZero() {
		t.Errorf("started written after seen's failed fsync: %v", got)
	}
}

// limitFileSize sets the process's file size limit (RLIMIT_FSIZE: a write
// past it fails with EFBIG; Go ignores SIGXFSZ) until restore, or the
// test's end: high enough for what else the test process writes meanwhile
// (its test log).
func limitFileSize(t *testing.T, max uint64) (restore func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	limit := old
	limit.Cur = max
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &limit); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	restore = func() {
		once.Do(func() {
			if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
				t.Error(err)
			}
		})
	}
	t.Cleanup(restore)
	return restore
}
