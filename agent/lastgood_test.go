package agent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/source"
)

// A Secret written inline in a pod's file never reaches the root dir: the
// pod's kept manifest has no Secret with values, and a daemon started with
// the file invalid runs the same pod (same UID, same config.seen) with the
// file's ConfigMap, without the Secret, which its containers wait for.
func TestLastGoodKeepsNoInlineSecretValue(t *testing.T) {
	const canary = "CANARY-lastgood-inline"
	paths := manifest.Paths{RootDir: t.TempDir()}
	dir := t.TempDir()
	file := filepath.Join(dir, "web.yaml")
	good := "apiVersion: v1\nkind: Pod\nmetadata: {name: web}\nspec:\n  containers: [{name: c, image: busybox}]\n" +
		"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cfg}\ndata: {a: b}\n" +
		"---\napiVersion: v1\nkind: Secret\nmetadata: {name: keys}\nstringData: {k: " + canary + "}\n"
	if err := os.WriteFile(file, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
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
	has := func(u source.Update, kind, name string) bool {
		for _, o := range u.Objects {
			if o.Kind() == kind && o.Name() == name {
				return true
			}
		}
		return false
	}

	store := NewSeenStore(paths)
	first := run(store)
	if len(first.Pods) != 1 || !has(first, "Secret", "keys") {
		t.Fatalf("first daemon: pods %v, objects %d", first.Pods, len(first.Objects))
	}
	pod := first.Pods[0]
	if err := store.Record(pod.Pod, time.Now()); err != nil { // the worker made its sandbox
		t.Fatal(err)
	}
	// manifest.json holds the manifest base64-encoded: read back decoded.
	kept := store.Stored(manifest.SourceFile)
	if len(kept) != 1 {
		t.Fatalf("kept %d manifests, want the pod's", len(kept))
	}
	if strings.Contains(string(kept[0].Data), canary) {
		t.Errorf("the kept manifest holds the Secret's value:\n%s", kept[0].Data)
	}
	grepRoot(t, paths.RootDir, canary)

	if err := os.WriteFile(file, []byte(strings.Replace(good, "image: busybox", "image: ''", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour) // written long ago: not settling
	os.Chtimes(file, old, old)
	second := run(NewSeenStore(paths))
	if len(second.Pods) != 1 || second.Pods[0].UID != pod.UID || second.Pods[0].Annotations[manifest.AnnotationSeen] != pod.Annotations[manifest.AnnotationSeen] {
		t.Fatalf("after a restart with the manifest invalid: pods %v, want %s with its config.seen", second.Pods, pod.UID)
	}
	if !has(second, "ConfigMap", "cfg") || has(second, "Secret", "keys") {
		t.Errorf("restored objects %d: want the ConfigMap, not the Secret", len(second.Objects))
	}
	grepRoot(t, paths.RootDir, canary)
}

// grepRoot fails t for each file under root that holds canary.
func grepRoot(t *testing.T, root, canary string) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(path)
		if err == nil && strings.Contains(string(b), canary) {
			t.Errorf("%s holds the Secret's value", path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
