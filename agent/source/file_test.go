package source

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/filestamp"
	"github.com/staticpodd/staticpodd/agent/manifest"
)

func podYAML(name, image string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: Pod\nmetadata:\n  name: %s\nspec:\n  containers:\n  - name: c\n    image: %s\n", name, image)
}

const broken = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: broken\nspec:\n  containers: []\n"

var seenAt = time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)

// start runs a file source on path and returns its updates.
func start(t *testing.T, path string, period time.Duration) <-chan Update {
	t.Helper()
	ch, _ := startSource(t, path, period)
	return ch
}

// startSource is start that returns the source too, whose lists a test can count.
func startSource(t *testing.T, path string, period time.Duration) (<-chan Update, *File) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Update)
	done := make(chan error, 1)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	seen := func(types.UID) time.Time { return seenAt }
	src := NewFile(path, "node1", period, seen, logger)
	go func() { done <- src.Run(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return out, src
}

// next returns the next update, failing after a few seconds.
func next(t *testing.T, ch <-chan Update) Update {
	t.Helper()
	select {
	case u := <-ch:
		return u
	case <-time.After(5 * time.Second):
		t.Fatal("no update within 5s")
		return Update{}
	}
}

// waitFor returns the first update for which ok holds.
func waitFor(t *testing.T, ch <-chan Update, what string, ok func(Update) bool) Update {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case u := <-ch:
			if ok(u) {
				return u
			}
		case <-deadline:
			t.Fatalf("no update with %s within 5s", what)
		}
	}
}

// noUpdateOverLists fails if an update arrives before src has listed the
// manifests n more times. A list that found a change would send it first:
// the send blocks until the test takes it, so no further list runs.
func noUpdateOverLists(t *testing.T, ch <-chan Update, src *File, n uint64) {
	t.Helper()
	from := src.lists.Load()
	deadline := time.After(5 * time.Second)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for src.lists.Load() < from+n {
		select {
		case u := <-ch:
			t.Fatalf("unexpected update: %s", describe(u))
		case <-deadline:
			t.Fatalf("the source listed %d times in 5s, want %d", src.lists.Load()-from, n)
		case <-tick.C:
		}
	}
}

// quiet fails if an update arrives within d.
func quiet(t *testing.T, ch <-chan Update, d time.Duration) {
	t.Helper()
	select {
	case u := <-ch:
		t.Fatalf("unexpected update: %s", describe(u))
	case <-time.After(d):
	}
}

func names(u Update) []string {
	var n []string
	for _, p := range u.Pods {
		n = append(n, p.Name)
	}
	slices.Sort(n)
	return n
}

func describe(u Update) string {
	var probs []string
	for _, p := range u.Problems {
		probs = append(probs, p.Origin)
	}
	return fmt.Sprintf("pods %v problems %v", names(u), probs)
}

func hasPods(want ...string) func(Update) bool {
	return func(u Update) bool { return slices.Equal(names(u), want) }
}

// renameIn writes body to a temp file outside dir and rename(2)s it to dir/name,
// as config management and the benchmark do.
func renameIn(t *testing.T, dir, name, body string) {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(tmp, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	// t.TempDir() is on the same filesystem as dir (both under the test's temp root).
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDirectoryAddEditDelete(t *testing.T) {
	dir := t.TempDir()
	ch := start(t, dir, time.Hour) // changes must come from inotify, not relists

	if u := next(t, ch); len(u.Pods) != 0 || len(u.Problems) != 0 || u.Source != manifest.SourceFile {
		t.Fatalf("first update = %s (source %q), want an empty file update", describe(u), u.Source)
	}

	renameIn(t, dir, "web.yaml", podYAML("web", "busybox:1.36"))
	u := waitFor(t, ch, "web", hasPods("web-node1"))
	first := u.Pods[0]
	if first.Origin != filepath.Join(dir, "web.yaml") || first.Annotations[manifest.AnnotationSeen] != seenAt.Format(time.RFC3339Nano) {
		t.Errorf("pod origin %q, config.seen %q", first.Origin, first.Annotations[manifest.AnnotationSeen])
	}

	writeFile(t, filepath.Join(dir, "web.yaml"), podYAML("web", "busybox:1.37"))
	u = waitFor(t, ch, "a new web UID", func(u Update) bool { return len(u.Pods) == 1 && u.Pods[0].UID != first.UID })
	if u.Pods[0].Spec.Containers[0].Image != "busybox:1.37" {
		t.Errorf("image = %q after the edit", u.Pods[0].Spec.Containers[0].Image)
	}

	writeFile(t, filepath.Join(dir, "db.json"), `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"db"},"spec":{"containers":[{"name":"c","image":"i"}]}}`)
	waitFor(t, ch, "db and web", hasPods("db-node1", "web-node1"))

	if err := os.Remove(filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "only db", hasPods("db-node1"))
}

func TestSkipsDotFilesBackupsAndSubdirectories(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "etcd.yaml"), podYAML("etcd", "etcd:3.5"))
	for _, name := range []string{".etcd.yaml.swp", ".hidden.yaml", "etcd.yaml.bak", "etcd.yaml~", "etcd.yaml.dpkg-old", "etcd.yaml.rpmsave", "etcd.yaml.orig"} {
		writeFile(t, filepath.Join(dir, name), podYAML("copy", "etcd:3.4"))
	}
	if err := os.Mkdir(filepath.Join(dir, "old"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "old", "old.yaml"), podYAML("old", "etcd:3.3"))

	ch := start(t, dir, time.Hour)
	u := next(t, ch)
	if !hasPods("etcd-node1")(u) || len(u.Problems) != 0 {
		t.Fatalf("update = %s, want only etcd", describe(u))
	}
	// Writing more leftovers changes nothing, so nothing is sent.
	writeFile(t, filepath.Join(dir, "etcd.yaml.backup"), podYAML("copy2", "etcd:3.4"))
	writeFile(t, filepath.Join(dir, ".another"), "junk")
	quiet(t, ch, 500*time.Millisecond)
}

func TestBrokenFileBesideGoodOne(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "good.yaml"), podYAML("good", "busybox"))
	writeFile(t, filepath.Join(dir, "broken.yaml"), broken)
	ch := start(t, dir, time.Hour)
	// The broken file was just written: its problem is reported once it settles.
	u := waitFor(t, ch, "a problem", func(u Update) bool { return len(u.Problems) == 1 })
	if !hasPods("good-node1")(u) {
		t.Fatalf("update = %s, want good and one problem", describe(u))
	}
	p := u.Problems[0]
	if p.Origin != filepath.Join(dir, "broken.yaml") || !strings.Contains(p.Err.Error(), "spec.containers: Required value: at least one container is required") {
		t.Errorf("problem %s: %v", p.Origin, p.Err)
	}
}

func TestGoodFileTurningBadKeepsLastGoodPod(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.yaml")
	writeFile(t, path, podYAML("app", "busybox"))
	ch := start(t, dir, time.Hour)
	good := next(t, ch)
	if !hasPods("app-node1")(good) {
		t.Fatalf("update = %s", describe(good))
	}

	writeFile(t, path, "apiVersion: v1\nkind: Pod\nmetadata:\n  name: app\nspec:\n  containers:\n  - name: c\n    image: \"\"\n")
	u := waitFor(t, ch, "a problem", func(u Update) bool { return len(u.Problems) == 1 })
	if !hasPods("app-node1")(u) || u.Pods[0].UID != good.Pods[0].UID {
		t.Errorf("update = %s, want the last good app pod kept", describe(u))
	}
	if !strings.Contains(u.Problems[0].Err.Error(), "spec.containers[0].image: Required value") {
		t.Errorf("problem = %v", u.Problems[0].Err)
	}

	writeFile(t, path, podYAML("app", "busybox:2"))
	u = waitFor(t, ch, "the fix", func(u Update) bool { return len(u.Problems) == 0 })
	if !hasPods("app-node1")(u) || u.Pods[0].UID == good.Pods[0].UID {
		t.Errorf("update = %s, want the new app pod", describe(u))
	}

	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "no pods", hasPods())
}

func TestSingleFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "test_pod.yaml")
	writeFile(t, path, podYAML("static-pod", "nginx:latest"))
	writeFile(t, filepath.Join(dir, "other.yaml"), podYAML("other", "nginx"))
	ch := start(t, path, time.Hour)
	u := next(t, ch)
	if !hasPods("static-pod-node1")(u) {
		t.Fatalf("update = %s, want only the named file's pod", describe(u))
	}
	// Editors replace the file by rename: the watch on its directory follows.
	renameIn(t, dir, "test_pod.yaml", podYAML("static-pod", "nginx:1.27"))
	u = waitFor(t, ch, "the edit", func(u Update) bool {
		return len(u.Pods) == 1 && u.Pods[0].UID != "" && u.Pods[0].Spec.Containers[0].Image == "nginx:1.27"
	})
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "no pods", hasPods())
	writeFile(t, path, podYAML("static-pod", "nginx:1.28"))
	waitFor(t, ch, "the pod back", hasPods("static-pod-node1"))
}

func TestDirectoryAppearingLater(t *testing.T) {
	root := t.TempDir()
	// The parent exists: inotify on it sees the directory appear.
	dir := filepath.Join(root, "manifests")
	ch := start(t, dir, time.Hour)
	if u := next(t, ch); len(u.Pods) != 0 {
		t.Fatalf("first update = %s, want empty", describe(u))
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "a.yaml"), podYAML("a", "busybox"))
	waitFor(t, ch, "a", hasPods("a-node1"))
	renameIn(t, dir, "b.yaml", podYAML("b", "busybox"))
	waitFor(t, ch, "a and b", hasPods("a-node1", "b-node1"))
}

// Neither the directory nor its parent exist: the nearest directory that does
// is watched for the next name on the way, so the directory is found when it
// is made, without waiting for a relist (the period here is an hour).
func TestDirectoryAndParentsAppearingLater(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "etc", "kubernetes", "manifests")
	ch := start(t, dir, time.Hour)
	if u := next(t, ch); len(u.Pods) != 0 {
		t.Fatalf("first update = %s, want empty", describe(u))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "a.yaml"), podYAML("a", "busybox"))
	waitFor(t, ch, "a", hasPods("a-node1"))
	// Once the directory exists it is watched too.
	renameIn(t, dir, "b.yaml", podYAML("b", "busybox"))
	waitFor(t, ch, "a and b", hasPods("a-node1", "b-node1"))
}

func TestHalfWrittenFileIsNotAProblem(t *testing.T) {
	dir := t.TempDir()
	ch := start(t, dir, time.Hour)
	next(t, ch)
	// A copy in progress: the first half, then the rest a moment later.
	body := podYAML("big", "busybox")
	path := filepath.Join(dir, "big.yaml")
	writeFile(t, path, body[:len(body)/2])
	time.Sleep(100 * time.Millisecond) // the copier's pace, not a wait for the code under test
	writeFile(t, path, body)
	u := next(t, ch)
	if !hasPods("big-node1")(u) || len(u.Problems) != 0 {
		t.Errorf("update = %s, want big and no problem", describe(u))
	}
}

func TestNoUpdateWithoutChange(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "a.yaml")
	writeFile(t, path, podYAML("a", "busybox"))
	ch, src := startSource(t, dir, 50*time.Millisecond)
	next(t, ch)
	// Rewriting the same content and relisting many times sends nothing.
	writeFile(t, path, podYAML("a", "busybox"))
	noUpdateOverLists(t, ch, src, 5)
}

// A manifest that is a hard link to a file elsewhere changes without an
// inotify event in any directory the source watches; Relist (systemctl
// reload) reads it at once instead of at the next periodic relist.
func TestRelistReadsChangesInotifyMisses(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	real := filepath.Join(elsewhere, "web.yaml")
	if err := os.WriteFile(real, []byte(podYAML("web", "busybox:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(real, filepath.Join(dir, "web.yaml")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := make(chan Update)
	src := NewFile(dir, "node1", time.Hour, nil, slog.New(slog.DiscardHandler))
	go src.Run(ctx, out)
	first := next(t, out)
	if len(first.Pods) != 1 || first.Pods[0].Spec.Containers[0].Image != "busybox:1" {
		t.Fatalf("first update %+v", first)
	}
	// The source lists once more right after its first list when that list
	// told it what to watch: let it settle into waiting first.
	quiet(t, out, 300*time.Millisecond)
	// Written in place through the other name: the event is in elsewhere.
	writeFile(t, real, podYAML("web", "busybox:2"))
	quiet(t, out, 300*time.Millisecond)
	src.Relist()
	u := next(t, out)
	if len(u.Pods) != 1 || u.Pods[0].Spec.Containers[0].Image != "busybox:2" {
		t.Fatalf("after Relist: %+v", u)
	}
}

// A pod keeps the config.seen it was first given while it stays in the set,
// even when the store has no time for it (it was never started), and the
// store is asked once per pod.
func TestSeenStableWhileListed(t *testing.T) {
	dir := t.TempDir()
	var asked []types.UID
	src := NewFile(dir, "node1", time.Hour, func(uid types.UID) time.Time {
		asked = append(asked, uid)
		return time.Now()
	}, slog.New(slog.DiscardHandler))
	writeFile(t, filepath.Join(dir, "a.yaml"), podYAML("a", "busybox:1.36"))
	first := src.list().Pods[0]
	writeFile(t, filepath.Join(dir, "b.yaml"), podYAML("b", "busybox:1.36"))
	u := src.list()
	if len(u.Pods) != 2 || u.Pods[0].Name != "a-node1" {
		t.Fatalf("second list = %s", describe(u))
	}
	if got, want := u.Pods[0].Annotations[manifest.AnnotationSeen], first.Annotations[manifest.AnnotationSeen]; got != want {
		t.Errorf("config.seen of a changed from %s to %s when b appeared", want, got)
	}
	if len(asked) != 2 {
		t.Errorf("store asked for %v, want once for a and once for b", asked)
	}
}

// Once sends the set once and returns; a file that fails while it may still
// be being written is reported once it has settled.
func TestOnce(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(podYAML("web", "busybox")), 0o644); err != nil {
		t.Fatal(err)
	}
	half := filepath.Join(dir, "half.yaml")
	if err := os.WriteFile(half, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: half\nspec:\n  containers:\n  - name: c\n    image: ["), 0o644); err != nil {
		t.Fatal(err)
	}
	src := NewFile(dir, "node1", time.Hour, nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
	out := make(chan Update, 2)
	if err := src.Once(context.Background(), out); err != nil {
		t.Fatalf("Once: %v", err)
	}
	close(out)
	var updates []Update
	for u := range out {
		updates = append(updates, u)
	}
	if len(updates) != 1 || len(updates[0].Pods) != 1 || len(updates[0].Problems) != 1 || updates[0].Problems[0].Origin != half {
		t.Errorf("updates = %+v, want one with the good pod and the half-written file as a problem", updates)
	}
}

func mkfifo(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o644); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkRelist is one relist of a directory of 100 unchanged manifests:
// the periodic one (stat) stats every file and reads none; the full one
// (read), Relist's and one periodic relist in fullRelist, reads and hashes
// every file, parsing none.
func BenchmarkRelist(b *testing.B) {
	dir := b.TempDir()
	var paths []string
	for i := range 100 {
		p := filepath.Join(dir, fmt.Sprintf("pod-%03d.yaml", i))
		if err := os.WriteFile(p, []byte(podYAML(fmt.Sprintf("pod-%03d", i), "busybox")), 0o644); err != nil {
			b.Fatal(err)
		}
		paths = append(paths, p)
	}
	time.Sleep(filestamp.Coarse) // until a read vouches for the files' content
	for _, c := range []struct {
		name    string
		readAll bool
	}{{"stat", false}, {"read", true}} {
		b.Run(c.name, func(b *testing.B) {
			src := NewFile(dir, "node1", time.Hour, func(types.UID) time.Time { return seenAt }, slog.New(slog.DiscardHandler))
			if u := src.list(); len(u.Pods) != 100 {
				b.Fatalf("%d pods", len(u.Pods))
			}
			src.sent, src.last = true, src.list().fingerprint // as after Run's first send
			from := src.reads.Load()
			for b.Loop() {
				src.readAll = c.readAll
				src.list()
			}
			b.ReportMetric(float64(src.reads.Load()-from)/float64(b.N), "files-read/op")
		})
	}
}

// Relists of unchanged manifests send nothing, and a change after them is
// sent whole, also one that keeps the manifest's own uid, which only the
// pod's digest tells (kept from one relist to the next since it is computed
// once per parse).
func TestRelistSendsOnlyChanges(t *testing.T) {
	dir := t.TempDir()
	body := func(image string) string {
		return strings.Replace(podYAML("web", image), "  name: web\n", "  name: web\n  uid: fixed-uid\n", 1)
	}
	if err := os.WriteFile(filepath.Join(dir, "web.yaml"), []byte(body("nginx:1")), 0o644); err != nil {
		t.Fatal(err)
	}
	ch, src := startSource(t, dir, 20*time.Millisecond)
	image := func(u Update) string {
		if len(u.Pods) != 1 {
			return ""
		}
		return u.Pods[0].Spec.Containers[0].Image
	}
	if u := next(t, ch); image(u) != "nginx:1" {
		t.Fatalf("first update %s", describe(u))
	}
	noUpdateOverLists(t, ch, src, 15)
	renameIn(t, dir, "web.yaml", body("nginx:2"))
	u := waitFor(t, ch, "the new image", func(u Update) bool { return image(u) == "nginx:2" })
	if p := u.Pods[0]; p.UID != "fixed-uid" || p.Annotations[manifest.AnnotationSeen] == "" {
		t.Errorf("changed pod: uid %q, annotations %v; want its own uid, stamped", p.UID, p.Annotations)
	}
	noUpdateOverLists(t, ch, src, 15)
}

// A pod handed to the agent is handed again, the same pod, while its
// manifest and its first-seen time stay: an update copies only the pods it
// has not handed before, so that a directory filled one manifest at a time
// costs a copy a pod, not a copy of the whole set at each file. And a pod
// once handed never changes: the agent shares it.
func TestUnchangedPodHandedAgainNotCopied(t *testing.T) {
	dir := t.TempDir()
	src := NewFile(dir, "node1", time.Hour, nil, slog.New(slog.DiscardHandler))
	const n = 50
	for i := range n {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("p%02d.yaml", i)), podYAML(fmt.Sprintf("p%02d", i), "busybox:1.36"))
	}
	first := src.list()
	if len(first.Pods) != n {
		t.Fatalf("first list = %s", describe(first))
	}
	kept := make([]*v1.Pod, n)
	for i, p := range first.Pods {
		kept[i] = p.DeepCopy()
	}

	// One manifest fewer: the update hands the other 49 as it handed them.
	if err := os.Remove(filepath.Join(dir, "p00.yaml")); err != nil {
		t.Fatal(err)
	}
	// (A manifest gone is let go once it stayed gone a moment: an editor
	// renames it away and back.)
	var u Update
	for deadline := time.Now().Add(10 * time.Second); ; {
		u = src.list()
		if len(u.Pods) == n-1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the removed manifest's pod is still listed: %s", describe(u))
		}
		time.Sleep(50 * time.Millisecond)
	}
	for i := range n - 1 {
		if u.Pods[i].Pod != first.Pods[i+1].Pod {
			t.Errorf("%s: handed anew (a copy) though its manifest did not change", first.Pods[i+1].Name)
		}
	}

	// A pod that left the set and came back without being read again gets
	// a new first-seen time, on a copy: the one handed before is unchanged.
	src.seenAt = nil
	again := src.list()
	if again.Pods[0].Pod == first.Pods[1].Pod {
		t.Fatal("a pod given a new config.seen was changed in place, not copied")
	}
	for i, p := range first.Pods {
		if !reflect.DeepEqual(p.Pod, kept[i]) {
			t.Errorf("%s changed after it was handed: %v, was %v", p.Name, p.Annotations, kept[i].Annotations)
		}
	}
}
