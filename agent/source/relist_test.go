package source

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/apimachinery/pkg/types"

	"github.com/staticpodd/staticpodd/agent/filestamp"
)

// settled waits until no file in paths has changed for racyWindow (Coarse
// for whole-second stamps): until a read of it vouches for its content. It
// waits on the files' own times.
func settled(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		var st syscall.Stat_t
		if err := syscall.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		changed := time.Unix(st.Mtim.Unix())
		if time.Unix(st.Ctim.Unix()).After(changed) {
			changed = time.Unix(st.Ctim.Unix())
		}
		window := racyWindow
		if st.Mtim.Nsec == 0 && st.Ctim.Nsec == 0 {
			window = filestamp.Coarse
		}
		time.Sleep(time.Until(changed.Add(window + time.Millisecond)))
	}
}

// The periodic relist of an idle daemon reads no manifest: it stats them,
// and none changed. (It read and hashed all 100 every 20 s, most of the
// daemon's CPU at rest.)
func TestIdleRelistReadsNothing(t *testing.T) {
	dir := t.TempDir()
	var paths []string
	for i := range 3 {
		p := filepath.Join(dir, fmt.Sprintf("pod-%d.yaml", i))
		writeFile(t, p, podYAML(fmt.Sprintf("pod-%d", i), "busybox"))
		paths = append(paths, p)
	}
	settled(t, paths...)
	ch, src := startSource(t, dir, 20*time.Millisecond)
	if u := next(t, ch); len(u.Pods) != 3 {
		t.Fatalf("first update %s", describe(u))
	}
	from := src.reads.Load()
	noUpdateOverLists(t, ch, src, 10)
	if n := src.reads.Load() - from; n != 0 {
		t.Errorf("10 relists of unchanged manifests read %d files, want none", n)
	}
}

// A relist that goes by the stat still sees each way a manifest changes: a
// rewrite in place of as many bytes, a file renamed over it, a symlinked
// manifest led to another file or whose target is rewritten, a file that
// turns invalid, and a removal; and it reads the changed file only. The
// lists here have no inotify: what they see is what a relist sees.
func TestRelistByStatSeesEveryChange(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	web, db, link := filepath.Join(dir, "web.yaml"), filepath.Join(dir, "db.yaml"), filepath.Join(dir, "cache.yaml")
	target1, target2 := filepath.Join(elsewhere, "one.yaml"), filepath.Join(elsewhere, "two.yaml")
	writeFile(t, web, podYAML("web", "busybox:1"))
	writeFile(t, db, podYAML("db", "busybox:1"))
	writeFile(t, target1, podYAML("cache", "busybox:1"))
	writeFile(t, target2, podYAML("cache", "busybox:2"))
	if err := os.Symlink(target1, link); err != nil {
		t.Fatal(err)
	}
	all := []string{web, db, target1, target2}
	settled(t, all...)
	src := NewFile(dir, "node1", time.Hour, func(types.UID) time.Time { return seenAt }, slog.New(slog.DiscardHandler))
	image := func(u Update, pod string) string {
		for _, p := range u.Pods {
			if p.Name == pod {
				return p.Spec.Containers[0].Image
			}
		}
		return ""
	}
	if u := src.list(); len(u.Pods) != 3 || image(u, "cache-node1") != "busybox:1" {
		t.Fatalf("first list %s", describe(u))
	}
	// list is a periodic relist; it must read exactly want files.
	list := func(step string, want uint64) Update {
		t.Helper()
		from := src.reads.Load()
		u := src.list()
		if n := src.reads.Load() - from; n != want {
			t.Errorf("%s: the relist read %d files, want %d", step, n, want)
		}
		return u
	}
	list("nothing changed", 0)

	// In place, as many bytes: the ctime moved.
	writeFile(t, web, podYAML("web", "busybox:2"))
	if u := list("web rewritten in place", 1); image(u, "web-node1") != "busybox:2" {
		t.Errorf("after web was rewritten in place: %s, web's image %q", describe(u), image(u, "web-node1"))
	}
	settled(t, web)
	list("web settled", 1) // read just after its write: read once more
	list("nothing changed", 0)

	// Renamed over: another inode.
	renameIn(t, dir, "db.yaml", podYAML("db", "busybox:2"))
	if u := list("db renamed over", 1); image(u, "db-node1") != "busybox:2" {
		t.Errorf("after db was renamed over: %s", describe(u))
	}
	settled(t, db)
	list("db settled", 1)

	// The symlink led to another file, swapped as ln -sfn does.
	tmp := filepath.Join(dir, ".cache.yaml.tmp")
	if err := os.Symlink(target2, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
	if u := list("symlink retargeted", 1); image(u, "cache-node1") != "busybox:2" {
		t.Errorf("after the symlink was led to another file: %s", describe(u))
	}
	list("nothing changed", 0)

	// The symlink's target rewritten in place.
	writeFile(t, target2, podYAML("cache", "busybox:3"))
	if u := list("symlink's target rewritten", 1); image(u, "cache-node1") != "busybox:3" {
		t.Errorf("after the symlink's target was rewritten: %s", describe(u))
	}
	settled(t, target2)
	list("target settled", 1)

	// Turned invalid: a problem for that file, its last good pod kept.
	writeFile(t, web, broken)
	settled(t, web)
	if u := list("web turned invalid", 1); len(u.Problems) != 1 || u.Problems[0].Origin != web || image(u, "web-node1") != "busybox:2" {
		t.Errorf("after web turned invalid: %s", describe(u))
	}
	list("nothing changed", 0)

	// Removed (rm): gone at the next list, as Run's unlink event says.
	if err := os.Remove(db); err != nil {
		t.Fatal(err)
	}
	src.noteUnlink(fsnotify.Event{Name: filepath.Join(src.realDir, "db.yaml"), Op: fsnotify.Remove})
	if u := list("db removed", 0); image(u, "db-node1") != "" || len(u.Pods) != 2 {
		t.Errorf("after db was removed: %s", describe(u))
	}
}

// The fingerprint of a relist that finds nothing changed is made in the
// buffer and maps of the last one: it allocates nothing, and is the one
// sent last.
func TestIdleFingerprintAllocatesNothing(t *testing.T) {
	dir := t.TempDir()
	for i := range 10 {
		writeFile(t, filepath.Join(dir, fmt.Sprintf("pod-%d.yaml", i)), podYAML(fmt.Sprintf("pod-%d", i), "busybox"))
	}
	src := NewFile(dir, "node1", time.Hour, func(types.UID) time.Time { return seenAt }, slog.New(slog.DiscardHandler))
	u := src.list()
	if len(u.Pods) != 10 {
		t.Fatalf("first list %s", describe(u))
	}
	src.sent, src.last = true, u.fingerprint
	paths := src.paths()
	src.fingerprint(paths, nil, nil) // the spare maps made once
	if n := testing.AllocsPerRun(20, func() {
		if fp := src.fingerprint(paths, nil, nil); fp != src.last {
			t.Fatalf("fingerprint of nothing changed %q, want %q", fp, src.last)
		}
	}); n != 0 {
		t.Errorf("fingerprint of 10 unchanged manifests: %.0f allocations, want none", n)
	}
	// A change is still one.
	writeFile(t, filepath.Join(dir, "pod-3.yaml"), podYAML("pod-3", "busybox:2"))
	if u := src.list(); u.fingerprint == src.last || len(u.Pods) != 10 {
		t.Errorf("after a change: fingerprint unchanged, or %s", describe(u))
	}
	// The spare map keeps no pod of the list before: not the changed
	// manifest's old one.
	if n := len(src.nextDigests); n != 0 || len(src.digests) != 10 {
		t.Errorf("after a change: %d digests kept in the spare map, %d in use; want 0 and 10", n, len(src.digests))
	}
}
