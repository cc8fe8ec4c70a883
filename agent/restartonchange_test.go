package agent

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/hostfiles"
	"github.com/staticpodd/staticpodd/agent/manifest"
	"github.com/staticpodd/staticpodd/agent/objects"
	"github.com/staticpodd/staticpodd/agent/source"
	"github.com/staticpodd/staticpodd/agent/status"
)

// A pod's UID follows the contents of its restart-on-change files, and
// only their contents, at most once per back-off; a file that signals
// instead leaves it alone.
func TestWatchedFilesUID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		conf, key := filepath.Join(dir, "x.conf"), filepath.Join(dir, "x.key")
		write := func(path, data string) {
			t.Helper()
			if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		write(conf, "a")
		write(key, "k")
		logger := slog.New(slog.DiscardHandler)
		a := &Agent{logger: logger, rt: newFakeRuntime(), statuses: status.NewManager("n", logger), files: hostfiles.New(time.Hour, logger)}
		defer a.onChange.wg.Wait()
		uid := func() string {
			t.Helper()
			pods := map[string]manifest.Pod{"default/p-n": {Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{
				Name: "p-n", Namespace: "default", UID: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
				Annotations: map[string]string{manifest.AnnotationRestartOnChange: conf + "," + key + "=SIGHUP"}}}}}
			a.applyWatchedFiles(t.Context(), pods, nil)
			// What the watcher would read at its next look.
			a.files = hostfiles.New(time.Hour, slog.New(slog.DiscardHandler))
			return string(pods["default/p-n"].UID)
		}
		first := uid()
		if first == "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" || uid() != first {
			t.Fatalf("UID %s, then %s", first, uid())
		}
		write(key, "k2") // signals; pod not published: nothing to signal
		if u := uid(); u != first {
			t.Errorf("a signal file's change changed the UID to %s", u)
		}
		write(conf, "b")
		second := uid()
		if second == first {
			t.Errorf("an edit of the file kept UID %s", first)
		}
		write(conf, "a")
		if u := uid(); u != second {
			t.Errorf("a change at once after the last one: UID %s, want %s held back", u, second)
		}
		time.Sleep(filesBackoff)
		if u := uid(); u != first {
			t.Errorf("the first contents back, after the back-off: UID %s, want %s", u, first)
		}
		if err := os.Remove(conf); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * filesBackoff) // the back-off doubled
		if u, again := uid(), uid(); u == first || u != again {
			t.Errorf("removed: UID %s then %s, want one new UID", u, again)
		}
	})
}

// A pod whose restart-on-change names a ConfigMap and a Secret is a new
// generation when their data change, and only then; the digest of a
// Secret's data is keyed with the daemon's key, which a restarted daemon
// reads back.
func TestWatchedObjectsUID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		root := t.TempDir()
		logger := slog.New(slog.DiscardHandler)
		newAgent := func() *Agent {
			a := &Agent{logger: logger, rt: newFakeRuntime(), statuses: status.NewManager("n", logger), files: hostfiles.New(time.Hour, logger)}
			a.cfg.Paths.RootDir = root
			return a
		}
		a := newAgent()
		defer a.onChange.wg.Wait()
		set := func(cm string, secret string) {
			a.objects.Store(objects.NewSet([]*objects.Object{
				{ConfigMap: &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}, Data: map[string]string{"a": cm}}},
				{Secret: &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: "default"}, Data: map[string][]byte{"k": []byte(secret)}}},
				{ConfigMap: &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "default"}, Data: map[string]string{"a": cm}}},
			}))
		}
		uid := func() string {
			t.Helper()
			pods := map[string]manifest.Pod{"default/p-n": {Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{
				Name: "p-n", Namespace: "default", UID: "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
				Annotations: map[string]string{manifest.AnnotationRestartOnChange: "configmap/cfg, secret/key"}}}}}
			a.applyWatchedFiles(t.Context(), pods, nil)
			return string(pods["default/p-n"].UID)
		}
		set("1", "s")
		first := uid()
		if first == "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa" || uid() != first {
			t.Fatalf("UID %s, then %s", first, uid())
		}
		a.objects.Store(objects.NewSet([]*objects.Object{
			{ConfigMap: &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg", Namespace: "default"}, Data: map[string]string{"a": "1"}}},
			{Secret: &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: "default"}, Data: map[string][]byte{"k": []byte("s")}}},
		}))
		if u := uid(); u != first {
			t.Errorf("a change of an object the pod does not name made UID %s", u)
		}
		set("1", "s2")
		second := uid()
		if second == first {
			t.Fatalf("a change of the Secret kept UID %s", first)
		}
		// A daemon started again reads the same key, hence the same UID.
		a = newAgent()
		set("1", "s2")
		if u := uid(); u != second {
			t.Errorf("a restarted daemon made UID %s, want %s", u, second)
		}
		if fi, err := os.Stat(filepath.Join(root, digestKeyFile)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("digest key: %v %v", fi, err)
		}
	})
}

// A daemon started again with a Secret the pod's restart-on-change names
// missing (the manifest unusable, the pod from its kept copy, which has no
// Secret with values of its own) keeps the generation that runs instead of
// restarting it, until the Secret is back: with the same data, the same
// generation still; with other data, a new one. Without a running generation
// of the manifest, the absence is a change as ever.
func TestWatchedObjectAbsentAtStartKeepsRunningGeneration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		paths := manifest.Paths{RootDir: t.TempDir()}
		logger := slog.New(slog.DiscardHandler)
		newAgent := func() *Agent {
			a := &Agent{logger: logger, rt: newFakeRuntime(), statuses: status.NewManager("n", logger), files: hostfiles.New(time.Hour, logger)}
			a.cfg.Paths = paths
			a.cfg.Seen = NewSeenStore(paths)
			return a
		}
		const base = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
		secret := func(a *Agent, data string) {
			var objs []*objects.Object
			if data != "" {
				objs = append(objs, &objects.Object{Secret: &v1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "key", Namespace: "default"}, Data: map[string][]byte{"k": []byte(data)}}})
			}
			a.objects.Store(objects.NewSet(objs))
		}
		uid := func(a *Agent, running ...string) string {
			t.Helper()
			pods := map[string]manifest.Pod{"default/p-n": {Pod: &v1.Pod{ObjectMeta: metav1.ObjectMeta{
				Name: "p-n", Namespace: "default", UID: base,
				Annotations: map[string]string{manifest.AnnotationRestartOnChange: "secret/key"}}}}}
			r := map[string]bool{}
			for _, u := range running {
				r[u] = true
			}
			a.applyWatchedFiles(t.Context(), pods, r)
			return string(pods["default/p-n"].UID)
		}

		a := newAgent()
		defer a.onChange.wg.Wait()
		secret(a, "s")
		running := uid(a)
		// Its sandbox made, the pod's manifest is kept (manifest.json
		// naming the manifest's UID); another pod's is as well.
		a.cfg.Seen.Offer(manifest.SourceFile, []source.Manifest{
			{UID: base, Source: manifest.SourceFile, Origin: "/m/p.yaml", Data: []byte("p")},
			{UID: "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb", Source: manifest.SourceFile, Origin: "/m/q.yaml", Data: []byte("q")},
		})
		for _, p := range []struct{ uid, manifest string }{{running, base}, {"cccccccccccccccccccccccccccccccc", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"}} {
			pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{UID: types.UID(p.uid), Annotations: map[string]string{manifest.AnnotationManifestUID: p.manifest}}}
			if err := a.cfg.Seen.Record(pod, time.Now()); err != nil {
				t.Fatal(err)
			}
		}

		a = newAgent() // the daemon restarts; the Secret is not there
		secret(a, "")
		for range 2 {
			if u := uid(a, running, "cccccccccccccccccccccccccccccccc"); u != running {
				t.Fatalf("the Secret missing at the daemon's start: UID %s, want the running %s", u, running)
			}
		}
		secret(a, "s")
		if u := uid(a, running); u != running {
			t.Errorf("the Secret back with the same data: UID %s, want %s", u, running)
		}
		secret(a, "s2")
		if u := uid(a, running); u == running {
			t.Errorf("the Secret changed: UID still %s", u)
		}

		a = newAgent() // nothing of this manifest runs: the absence is a change
		secret(a, "")
		if u := uid(a, "cccccccccccccccccccccccccccccccc"); u == running || u == base {
			t.Errorf("the Secret missing, no generation running: UID %s", u)
		}
	})
}
