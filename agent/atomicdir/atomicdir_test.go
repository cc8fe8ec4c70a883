package atomicdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

func read(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestWriteLayoutAndUpdate(t *testing.T) {
	dir := t.TempDir()
	changed, err := Write(dir, map[string]File{
		"labels":         {Data: []byte(`app="web"`), Mode: 0o644},
		"meta/name":      {Data: []byte("web-node"), Mode: 0o400},
		"meta/namespace": {Data: []byte("default"), Mode: 0o644},
	}, -1)
	if err != nil || !changed {
		t.Fatalf("first write: changed %v err %v", changed, err)
	}
	// The kubelet's layout: visible names are symlinks into ..data, which
	// names a hidden timestamped directory.
	for name, target := range map[string]string{"labels": "..data/labels", "meta": "..data/meta"} {
		if got, err := os.Readlink(filepath.Join(dir, name)); err != nil || got != target {
			t.Errorf("%s -> %q (%v), want -> %s", name, got, err, target)
		}
	}
	ts1, err := os.Readlink(filepath.Join(dir, "..data"))
	if err != nil || !strings.HasPrefix(ts1, "..20") {
		t.Fatalf("..data -> %q (%v), want a timestamped directory", ts1, err)
	}
	if got := read(t, filepath.Join(dir, "meta", "name")); got != "web-node" {
		t.Errorf("meta/name %q", got)
	}
	if fi, err := os.Stat(filepath.Join(dir, "meta", "name")); err != nil || fi.Mode().Perm() != 0o400 {
		t.Errorf("meta/name mode %v (%v), want 0400", fi.Mode(), err)
	}

	// The same set again changes nothing.
	same := map[string]File{
		"labels":         {Data: []byte(`app="web"`), Mode: 0o644},
		"meta/name":      {Data: []byte("web-node"), Mode: 0o400},
		"meta/namespace": {Data: []byte("default"), Mode: 0o644},
	}
	if changed, err := Write(dir, same, -1); err != nil || changed {
		t.Fatalf("same set: changed %v err %v", changed, err)
	}
	if ts, _ := os.Readlink(filepath.Join(dir, "..data")); ts != ts1 {
		t.Errorf("..data moved to %s for an unchanged set", ts)
	}

	// A changed value and a name gone: a new directory, the old one and
	// the stale name removed.
	changed, err = Write(dir, map[string]File{"labels": {Data: []byte(`app="api"`), Mode: 0o644}}, -1)
	if err != nil || !changed {
		t.Fatalf("update: changed %v err %v", changed, err)
	}
	ts2, _ := os.Readlink(filepath.Join(dir, "..data"))
	if ts2 == ts1 {
		t.Error("..data still names the old directory")
	}
	if _, err := os.Stat(filepath.Join(dir, ts1)); !os.IsNotExist(err) {
		t.Errorf("old directory %s: %v, want it gone", ts1, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "meta")); !os.IsNotExist(err) {
		t.Errorf("stale name meta: %v, want it gone", err)
	}
	if got := read(t, filepath.Join(dir, "labels")); got != `app="api"` {
		t.Errorf("labels %q after the update", got)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 { // labels, ..data, the timestamped directory
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("entries %v, want labels, ..data and one timestamped directory", names)
	}
}

func TestWriteRefusesBadPaths(t *testing.T) {
	for _, p := range []string{"", "/etc/passwd", "../x", "a/../../x", "..data", "..x/y"} {
		if _, err := Write(t.TempDir(), map[string]File{p: {Data: []byte("x"), Mode: 0o644}}, -1); err == nil {
			t.Errorf("path %q accepted", p)
		}
	}
}

func TestWriteGroup(t *testing.T) {
	testroot.Require(t)
	dir := t.TempDir()
	if _, err := Write(dir, map[string]File{"a/b": {Data: []byte("x"), Mode: 0o600}}, 2000); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, "a", "b"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640 (group read added for fsGroup)", fi.Mode())
	}
	for _, p := range []string{filepath.Join(dir, "a", "b"), filepath.Join(dir, "a")} {
		var st unix.Stat_t
		if err := unix.Stat(p, &st); err != nil {
			t.Fatal(err)
		}
		if st.Gid != 2000 {
			t.Errorf("%s: group %d, want 2000", p, st.Gid)
		}
	}
}

// A daemon killed between the rename of ..data and the visible symlinks
// leaves the data current and a name missing: the next write of the same
// set makes it, as the kubelet's AtomicWriter does since
// kubernetes/kubernetes#121472.
func TestWriteUnchangedRestoresVisibleNames(t *testing.T) {
	dir := t.TempDir()
	files := map[string]File{
		"tls.crt": {Data: []byte("cert"), Mode: 0o644},
		"tls.key": {Data: []byte("key"), Mode: 0o400},
	}
	if _, err := Write(dir, files, -1); err != nil {
		t.Fatal(err)
	}
	ts, _ := os.Readlink(filepath.Join(dir, "..data"))
	if err := os.Remove(filepath.Join(dir, "tls.key")); err != nil {
		t.Fatal(err)
	}
	changed, err := Write(dir, files, -1)
	if err != nil {
		t.Fatal(err)
	}
	if changed {
		t.Error("changed: the data did not")
	}
	if got, err := os.Readlink(filepath.Join(dir, "tls.key")); err != nil || got != "..data/tls.key" {
		t.Errorf("tls.key -> %q (%v), want -> ..data/tls.key", got, err)
	}
	if got := read(t, filepath.Join(dir, "tls.key")); got != "key" {
		t.Errorf("tls.key %q", got)
	}
	if now, _ := os.Readlink(filepath.Join(dir, "..data")); now != ts {
		t.Errorf("..data moved to %s for an unchanged set", now)
	}
}

// A write cut short after the rename of ..data leaves the previous
// timestamped directory, with the previous values (a rotated-out key, in a
// secret volume the container can list): the next write removes every
// timestamped directory ..data does not name, even of an unchanged set.
func TestWriteRemovesOrphanedDataDirs(t *testing.T) {
	dir := t.TempDir()
	files := map[string]File{"tls.key": {Data: []byte("new"), Mode: 0o400}}
	if _, err := Write(dir, files, -1); err != nil {
		t.Fatal(err)
	}
	orphan := filepath.Join(dir, "..2020_01_02_03_04_05.123456")
	if err := os.Mkdir(orphan, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(orphan, "tls.key"), []byte("old"), 0o400); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dir, files, -1); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(orphan); !os.IsNotExist(err) {
		t.Errorf("orphaned %s: %v, want it gone", orphan, err)
	}
	if got := read(t, filepath.Join(dir, "tls.key")); got != "new" {
		t.Errorf("tls.key %q", got)
	}
}
