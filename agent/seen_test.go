package agent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/poddir"
	"github.com/staticpodd/staticpodd/agent/source"
	"github.com/staticpodd/staticpodd/agent/volumes"
)

// A pod that was never started leaves no file; a started one's config.seen
// survives a daemon restart (a new store on the same root) and goes with the
// pod's directory.
func TestSeenRecordedOnlyForStartedPods(t *testing.T) {
	paths := manifest.Paths{RootDir: t.TempDir()}
	before := time.Now()
	if got := NewSeenStore(paths).Seen("u1"); got.Before(before) {
		t.Errorf("seen of an unknown pod = %v, want the current time", got)
	}
	if _, err := os.Stat(poddir.Root(paths.RootDir).Pod("u1")); !os.IsNotExist(err) {
		t.Fatalf("Seen made the pod's directory (err %v): a pod never started would leave it", err)
	}

	at := time.Date(2026, 3, 4, 5, 6, 7, 8, time.UTC)
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1",
		Annotations: map[string]string{manifest.AnnotationSeen: at.Format(time.RFC3339Nano)}}}
	started := at.Add(time.Second)
	if got := NewSeenStore(paths).Started("u1", started.Add(time.Hour)); !got.Equal(started.Add(time.Hour)) {
		t.Errorf("start time of a pod never started = %v, want the one given", got)
	}
	if err := NewSeenStore(paths).Record(pod, started); err != nil {
		t.Fatal(err)
	}
	if got := NewSeenStore(paths).Seen("u1"); !got.Equal(at) {
		t.Errorf("seen after a restart = %v, want %v", got, at)
	}
	if got := NewSeenStore(paths).Started("u1", time.Now()); !got.Equal(started) {
		t.Errorf("start time after a restart = %v, want %v", got, started)
	}
	// A second record keeps the first time.
	pod.Annotations[manifest.AnnotationSeen] = at.Add(time.Hour).Format(time.RFC3339Nano)
	if err := NewSeenStore(paths).Record(pod, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got := NewSeenStore(paths).Seen("u1"); !got.Equal(at) {
		t.Errorf("seen after a second record = %v, want %v", got, at)
	}
	if err := volumes.Remove("u1", poddir.Root(paths.RootDir)); err != nil {
		t.Fatal(err)
	}
	if got := NewSeenStore(paths).Seen("u1"); !got.After(at) {
		t.Errorf("a pod seen anew after its removal kept its old time %v", got)
	}
}

// The last good pod of a manifest that turned invalid outlives a daemon
// restart: the pod's manifest is kept with its state once it starts, and a
// file source started anew (the next daemon) runs that pod, same UID, with a
// problem saying why, instead of stopping it. A pod that never started keeps
// nothing, and a removed pod's manifest goes with its directory.
func TestLastGoodPodOutlivesRestart(t *testing.T) {
	paths := manifest.Paths{RootDir: t.TempDir()}
	dir := t.TempDir()
	file := filepath.Join(dir, "web.yaml")
	good := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, image: busybox}]\n"
	if err := os.WriteFile(file, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	// run is one daemon's file source until its first update.
	run := func(store *SeenStore) source.Update {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		src := source.NewFile(dir, "node1", time.Hour, store.Seen, slog.New(slog.DiscardHandler))
		src.Store = store
		out := make(chan source.Update)
		done := make(chan error, 1)
		go func() { done <- src.Run(ctx, out) }()
		u := <-out
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		return u
	}

	store := NewSeenStore(paths)
	first := run(store)
	if len(first.Pods) != 1 {
		t.Fatalf("first daemon: %+v", first)
	}
	pod := first.Pods[0]
	if _, err := os.Stat(filepath.Join(poddir.Root(paths.RootDir).Pod(string(pod.UID)), "manifest.json")); !os.IsNotExist(err) {
		t.Fatalf("a pod not started yet has its manifest kept (err %v)", err)
	}
	if err := store.Record(pod.Pod, time.Now()); err != nil { // the worker made its sandbox
		t.Fatal(err)
	}

	// The manifest turns invalid while the daemon is down, then it starts.
	if err := os.WriteFile(file, []byte(strings.Replace(good, "image: busybox", "image: ''", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour) // written long ago: not settling
	os.Chtimes(file, old, old)
	second := run(NewSeenStore(paths))
	if len(second.Pods) != 1 || second.Pods[0].UID != pod.UID || second.Pods[0].Annotations[manifest.AnnotationSeen] != pod.Annotations[manifest.AnnotationSeen] {
		t.Fatalf("after a restart with the manifest invalid: pods %v, want %s with its config.seen", second.Pods, pod.UID)
	}
	if len(second.Problems) != 1 || !strings.Contains(second.Problems[0].Err.Error(), "spec.containers[0].image: Required value") {
		t.Errorf("problems %v", second.Problems)
	}

	// On another node the kept manifest gives another UID: not used.
	src := source.NewFile(dir, "node2", time.Hour, nil, slog.New(slog.DiscardHandler))
	src.Store = NewSeenStore(paths)
	ctx, cancel := context.WithCancel(t.Context())
	out := make(chan source.Update)
	go src.Run(ctx, out)
	if u := <-out; len(u.Pods) != 0 {
		t.Errorf("node2 ran %v from node1's kept manifest", u.Pods)
	}
	cancel()

	// Removed: nothing is kept any more.
	if err := volumes.Remove(string(pod.UID), poddir.Root(paths.RootDir)); err != nil {
		t.Fatal(err)
	}
	if kept := NewSeenStore(paths).Stored(manifest.SourceFile); len(kept) != 0 {
		t.Errorf("kept after removal: %v", kept)
	}
}

// A pod started by a daemon that kept no manifest gets one as soon as its
// source offers it again.
func TestManifestKeptForPodStartedBefore(t *testing.T) {
	paths := manifest.Paths{RootDir: t.TempDir()}
	at := time.Now()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", Annotations: map[string]string{manifest.AnnotationSeen: at.Format(time.RFC3339Nano)}}}
	if err := NewSeenStore(paths).Record(pod, time.Now()); err != nil { // nothing offered: seen only
		t.Fatal(err)
	}
	store := NewSeenStore(paths)
	if kept := store.Stored(manifest.SourceFile); len(kept) != 0 {
		t.Fatalf("kept before any offer: %v", kept)
	}
	store.Offer(manifest.SourceFile, []source.Manifest{{UID: "u1", Source: manifest.SourceFile, Origin: "/m/a.yaml", Data: []byte("x")},
		{UID: "u2", Source: manifest.SourceFile, Origin: "/m/b.yaml", Data: []byte("y")}})
	kept := store.Stored(manifest.SourceFile)
	if len(kept) != 1 || kept[0].UID != "u1" || kept[0].Origin != "/m/a.yaml" || string(kept[0].Data) != "x" {
		t.Errorf("kept %+v, want u1's only (u2 never started)", kept)
	}
	if _, err := os.Stat(poddir.Root(paths.RootDir).Pod("u2")); !os.IsNotExist(err) {
		t.Errorf("an offer made the directory of a pod never started (err %v)", err)
	}
}

// The syncloop health check fails only when the loop has not begun an
// iteration for twice the sync frequency, five minutes at least.
func TestSyncLoopHealthCheck(t *testing.T) {
	a := &Agent{cfg: Config{SyncFrequency: time.Minute}}
	if err := a.SyncLoopHealthCheck(); err != nil {
		t.Errorf("before the first iteration: %v", err)
	}
	a.loopAt.Store(time.Now().Add(-4 * time.Minute).UnixNano())
	if err := a.SyncLoopHealthCheck(); err != nil {
		t.Errorf("4m ago with a 1m sync frequency: %v", err)
	}
	a.loopAt.Store(time.Now().Add(-6 * time.Minute).UnixNano())
	if err := a.SyncLoopHealthCheck(); err == nil {
		t.Error("6m ago: no error")
	}
	a.cfg.SyncFrequency = 4 * time.Minute
	if err := a.SyncLoopHealthCheck(); err != nil {
		t.Errorf("6m ago with a 4m sync frequency: %v", err)
	}
}

// A pod seen Pending then Running is one pod start; every sync of its
// worker is timed, the first as create.
func TestPodTimings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rt := newFakeRuntime()
		h := start(t, rt, Config{})
		h.send([]manifest.Pod{testPod("web", "u-web", v1.RestartPolicyAlways, ctr("main", "busybox"))})
		if p := h.pod("web"); p.Status.Phase != v1.PodRunning {
			t.Fatalf("phase %s", p.Status.Phase)
		}
		if s := h.a.PodStartDurations(); s.Count != 1 {
			t.Errorf("pod starts %d, want 1", s.Count)
		}
		w := h.a.PodWorkerDurations()
		if w["create"].Count != 1 {
			t.Errorf("worker syncs %+v, want one create", w)
		}
	})
}

// Offer keeps the manifest of a started pod it lists, beside the pod's
// worker: the worker's teardown may remove the pod's directory between
// Offer's look at the seen file and its write. The write never makes the
// directory again, which nothing would ever remove.
func TestKeptManifestNeverMakesThePodsDirectory(t *testing.T) {
	paths := manifest.Paths{RootDir: t.TempDir()}
	store := NewSeenStore(paths)
	m := source.Manifest{UID: "u1", Source: manifest.SourceFile, Origin: "/etc/kubernetes/manifests/web.yaml", Data: []byte("{}")}
	if err := store.keepManifest("u1", m); err == nil {
		t.Error("a manifest was kept for a pod without a directory")
	}
	if _, err := os.Stat(poddir.Root(paths.RootDir).Pod("u1")); !os.IsNotExist(err) {
		t.Fatalf("keeping a manifest made the pod's directory (err %v): nothing would remove it", err)
	}
	// A pod with its directory gets it.
	if err := os.MkdirAll(poddir.Root(paths.RootDir).Pod("u1"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := store.keepManifest("u1", m); err != nil {
		t.Fatal(err)
	}
	if got := store.ManifestUID("u1"); got != "u1" {
		t.Errorf("the kept manifest's UID = %q, want u1", got)
	}
}
