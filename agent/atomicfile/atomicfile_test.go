package atomicfile

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestWriteReplaces(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "new" {
		t.Fatalf("content = %q, %v; want new", got, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
	assertOnly(t, dir, "state.json")
}

// A rename that fails (the target is a non-empty directory) leaves the old
// target and no temp file behind.
func TestWriteFailureLeavesNothing(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := os.MkdirAll(filepath.Join(path, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new")); err == nil {
		t.Fatal("Write over a non-empty directory succeeded")
	}
	assertOnly(t, dir, "state.json")
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		t.Fatalf("target changed: %v %v", fi, err)
	}
}

func TestWriteMissingDir(t *testing.T) {
	if err := Write(filepath.Join(t.TempDir(), "no", "such"), []byte("x")); err == nil {
		t.Fatal("Write into a missing directory succeeded")
	}
}

func assertOnly(t *testing.T, dir, name string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) != 1 || ents[0].Name() != name {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Fatalf("dir holds %v, want only %s", names, name)
	}
}

// MkdirAll makes what is missing, with perm, and takes what exists.
func TestMkdirAll(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "a", "b", "c")
	for range 2 {
		if err := MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"a", "a/b", "a/b/c"} {
		if fi, err := os.Stat(filepath.Join(top, d)); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v", d, fi, err)
		}
	}
	if err := MkdirAll(filepath.Join(top, "a", "b", "c", "f"), 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(top, "file"), nil, 0o600)
	if err := MkdirAll(filepath.Join(top, "file", "x"), 0o700); err == nil {
		t.Error("MkdirAll under a file succeeded")
	}
}

// Read returns a record, and refuses without blocking or reading without
// end what is not one: a FIFO (which no writer opens), a device, a file
// larger than the bound; a missing record is fs.ErrNotExist.
func TestRead(t *testing.T) {
	dir := t.TempDir()
	rec := filepath.Join(dir, "rec.json")
	if err := Write(rec, []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if b, err := Read(rec, 7); err != nil || string(b) != `{"a":1}` {
		t.Fatalf("Read = %q, %v", b, err)
	}
	if _, err := Read(rec, 6); err == nil || !strings.Contains(err.Error(), "larger than 6 bytes") {
		t.Errorf("a record over the bound: %v", err)
	}
	if _, err := Read(filepath.Join(dir, "none"), 10); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a missing record: %v, want fs.ErrNotExist", err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, "/dev/zero", dir} {
		if _, err := Read(p, 10); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("Read(%s) = %v, want not a regular file", p, err)
		}
	}
}

// Replace replaces the content whole, without the fsync steps, and leaves
// no temp file.
func TestReplace(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "conditions.json")
	var steps []Step
	defer SetTestHook(func(s Step, _ string) { steps = append(steps, s) })()
	for _, data := range []string{"first, longer", "second"} {
		if err := Replace(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if got, err := Read(path, 1<<10); err != nil || string(got) != data {
			t.Fatalf("after Replace(%q): %q, %v", data, got, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("directory holds %v (%v), want the file alone", entries, err)
	}
	for _, s := range steps {
		if s == Synced || s == DirSynced {
			t.Fatalf("Replace took step %v", s)
		}
	}
}

// WriteContent replaces the file as Write does, its content fsynced before
// the rename, but does not fsync the directory after it.
func TestWriteContent(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "meta.json")
	var steps []Step
	defer SetTestHook(func(s Step, _ string) { steps = append(steps, s) })()
	for _, data := range []string{"first, longer", "second"} {
		steps = nil
		if err := WriteContent(path, []byte(data)); err != nil {
			t.Fatal(err)
		}
		if got, err := Read(path, 1<<10); err != nil || string(got) != data {
			t.Fatalf("after WriteContent(%q): %q, %v", data, got, err)
		}
		if want := []Step{Created, Written, Synced, Renamed}; !slices.Equal(steps, want) {
			t.Fatalf("WriteContent took steps %v, want %v", steps, want)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v (%v), want 0600", fi.Mode(), err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) != 1 {
		t.Fatalf("directory holds %v (%v), want the file alone", entries, err)
	}
	// A failed fsync of its content leaves the file as it was.
	defer SetSyncFault(func(string) error { return syscall.EIO })()
	var se *SyncError
	if err := WriteContent(path, []byte("third")); !errors.As(err, &se) {
		t.Fatalf("WriteContent with its fsync failing: %v, want a SyncError", err)
	}
	if got, err := Read(path, 1<<10); err != nil || string(got) != "second" {
		t.Fatalf("after a failed WriteContent: %q, %v; want the old content", got, err)
	}
}

// WriteFiles replaces every file, new or old, mode 0600, and leaves no
// temp file; each file goes through every step of Write, every file's
// fsync returns before the first rename, and the directory's comes after
// the last.
func TestWriteFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a"), []byte("old a"), 0o644); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var steps []string
	defer SetTestHook(func(s Step, p string) {
		mu.Lock()
		steps = append(steps, filepath.Base(p)+" "+s.String())
		mu.Unlock()
	})()
	if err := WriteFiles(dir, []File{{"a", []byte("new a")}, {"b", []byte("new b")}, {"c", nil}}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"a": "new a", "b": "new b", "c": ""} {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
		if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", name, fi, err)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Errorf("%d entries in the directory, want a, b and c", len(entries))
	}
	mu.Lock()
	defer mu.Unlock()
	// The fsyncs return in any order, all before the renames.
	synced := steps[6:9]
	slices.Sort(synced)
	got := strings.Join(steps[:6], " ") + " | " + strings.Join(synced, " ") + " | " + strings.Join(steps[9:], " ")
	want := "a created a written b created b written c created c written | " +
		"a synced b synced c synced | " +
		"a renamed b renamed c renamed a dirsynced b dirsynced c dirsynced"
	if got != want {
		t.Errorf("steps\n%s\nwant\n%s", got, want)
	}
	if err := WriteFiles(dir, nil); err != nil {
		t.Errorf("no files: %v", err)
	}
}

// The files' fsyncs wait together: the first file's fsync is held until
// the second's has returned, which a WriteFiles syncing one file after the
// other never gets to.
func TestWriteFilesSyncsTogether(t *testing.T) {
	dir := t.TempDir()
	bSynced := make(chan struct{})
	defer SetTestHook(func(s Step, p string) {
		if s != Synced {
			return
		}
		switch filepath.Base(p) {
		case "b":
			close(bSynced)
		case "a":
			select {
			case <-bSynced:
			case <-time.After(time.Minute):
				t.Error("a's fsync returned and b's was not done a minute later: the fsyncs are not made together")
			}
		}
	})()
	if err := WriteFiles(dir, []File{{"a", []byte("a")}, {"b", []byte("b")}}); err != nil {
		t.Fatal(err)
	}
}

// A name that is not a file's name in the directory, a temp file's name,
// one too long for its temp file, or one given twice, is refused before
// anything is written.
func TestWriteFilesRefusesNames(t *testing.T) {
	long := strings.Repeat("n", maxName+1)
	for _, files := range [][]File{
		{{"", nil}}, {{".", nil}}, {{"..", nil}}, {{"../x", nil}}, {{"x/y", nil}}, {{"/x", nil}},
		{{"x\x00y", nil}}, {{".x.tmp-1", nil}}, {{long, nil}}, {{"x", nil}, {"x", nil}},
	} {
		dir := t.TempDir()
		files = append([]File{{"ok", []byte("x")}}, files...)
		if err := WriteFiles(dir, files); err == nil || !strings.Contains(err.Error(), "not a file name") {
			t.Errorf("%q: %v; want refused as not a file name", files[1].Name, err)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%q: %d entries written", files[1].Name, len(entries))
		}
	}
	// The longest name taken has a temp file too.
	dir := t.TempDir()
	if err := WriteFiles(dir, []File{{strings.Repeat("n", maxName), []byte("x")}}); err != nil {
		t.Errorf("a name of %d bytes: %v", maxName, err)
	}
}

// A rename that fails (the second target is a non-empty directory) leaves
// the first file replaced, whole, the second target as it was, and no temp
// file; the directory is fsynced for the first's rename, and when that
// fsync fails too the error is a SyncError, which says the first may not
// be on disk.
func TestWriteFilesFailureAtARename(t *testing.T) {
	for _, syncFails := range []bool{false, true} {
		dir := t.TempDir()
		if err := os.MkdirAll(filepath.Join(dir, "b", "x"), 0o755); err != nil {
			t.Fatal(err)
		}
		restore := SetSyncFault(func(p string) error {
			if syncFails && p == dir {
				return syscall.EIO
			}
			return nil
		})
		err := WriteFiles(dir, []File{{"a", []byte("new a")}, {"b", []byte("new b")}, {"c", []byte("new c")}})
		restore()
		if err == nil {
			t.Fatal("WriteFiles over a non-empty directory succeeded")
		}
		var se *SyncError
		if got := errors.As(err, &se); got != syncFails || syncFails && !errors.Is(err, syscall.EIO) {
			t.Errorf("directory fsync failing %v: err %v, a SyncError %v", syncFails, err, got)
		}
		if got, err := os.ReadFile(filepath.Join(dir, "a")); err != nil || string(got) != "new a" {
			t.Errorf("a = %q, %v; want new a", got, err)
		}
		if fi, err := os.Stat(filepath.Join(dir, "b")); err != nil || !fi.IsDir() {
			t.Errorf("b changed: %v %v", fi, err)
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if e.Name() != "a" && e.Name() != "b" {
				t.Errorf("left %s", e.Name())
			}
		}
	}
}

// A directory that does not exist fails the write, leaving nothing.
func TestWriteFilesMissingDir(t *testing.T) {
	if err := WriteFiles(filepath.Join(t.TempDir(), "no"), []File{{"a", []byte("x")}}); err == nil {
		t.Fatal("WriteFiles into a missing directory succeeded")
	}
}

// MkdirWriteFiles makes the directory and its missing parents, mode perm,
// then writes the files as WriteFiles does, each directory made having its
// parent fsynced (ParentSynced) before the first rename; into a directory
// that exists, it is WriteFiles.
func TestMkdirWriteFiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pods", "uid")
	var mu sync.Mutex
	var steps []string
	restore := SetTestHook(func(s Step, p string) {
		mu.Lock()
		steps = append(steps, s.String()+" "+strings.TrimPrefix(p, root+"/"))
		mu.Unlock()
	})
	defer restore()
	if err := MkdirWriteFiles(root, dir, 0o700, []File{{"seen", []byte("t1")}, {"started", []byte("t2")}}); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{filepath.Join(root, "pods"), dir} {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("%s: %v, %v; want a directory, mode 0700", d, fi, err)
		}
	}
	for name, want := range map[string]string{"seen": "t1", "started": "t2"} {
		if got, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(got) != want {
			t.Errorf("%s = %q, %v; want %q", name, got, err, want)
		}
	}
	mu.Lock()
	firstRename := slices.IndexFunc(steps, func(s string) bool { return strings.HasPrefix(s, "renamed ") })
	for _, made := range []string{"pods", "pods/uid"} {
		if i := slices.Index(steps, "parentsynced "+made); i < 0 || i > firstRename {
			t.Errorf("%s: its parent's fsync at step %d, the first rename at %d: %v", made, i, firstRename, steps)
		}
	}
	steps = nil
	mu.Unlock()
	if err := MkdirWriteFiles(root, dir, 0o700, []File{{"seen", []byte("t3")}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "seen")); string(got) != "t3" {
		t.Errorf("seen = %q after the second write, want t3", got)
	}
	// Into a directory that exists (made by another, say with
	// os.MkdirAll): the parents are fsynced all the same, before the rename.
	mu.Lock()
	// The fsyncs of the file and of the parents end in any order.
	slices.Sort(steps[2:5])
	if want := "[created pods/uid/seen written pods/uid/seen parentsynced pods parentsynced pods/uid synced pods/uid/seen renamed pods/uid/seen dirsynced pods/uid/seen]"; fmt.Sprint(steps) != want {
		t.Errorf("into a directory that exists: %v, want %s", steps, want)
	}
	mu.Unlock()
	assertOnlyNames(t, dir, "seen", "started")
	// A parent that is a file: nothing made, the error says so.
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := MkdirWriteFiles(root, filepath.Join(file, "uid"), 0o700, []File{{"seen", nil}}); err == nil {
		t.Error("MkdirWriteFiles under a file succeeded")
	}
	// A directory not under top: refused.
	if err := MkdirWriteFiles(filepath.Join(root, "pods"), filepath.Join(root, "other"), 0o700, []File{{"x", nil}}); err == nil || !strings.Contains(err.Error(), "not under") {
		t.Errorf("a directory not under top: %v", err)
	}
	// A bad name: refused before any directory is made.
	if err := MkdirWriteFiles(root, filepath.Join(root, "other"), 0o700, []File{{"../x", nil}}); err == nil {
		t.Error("MkdirWriteFiles of ../x succeeded")
	}
	if _, err := os.Stat(filepath.Join(root, "other")); !os.IsNotExist(err) {
		t.Errorf("a directory made for a refused name: %v", err)
	}
}

// The parents' fsyncs wait together with the files': the file's fsync and
// its directory's parent's are both under way before either may go on
// (each, as it starts, waits for the other to start), which fsyncs made one
// after the other, in either order, never get to.
func TestMkdirWriteFilesSyncsParentsWithFiles(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "uid")
	var started sync.WaitGroup
	started.Add(2)
	both := make(chan struct{})
	go func() { started.Wait(); close(both) }()
	var once [2]sync.Once
	defer SetSyncFault(func(p string) error {
		i := -1
		switch {
		case p == root:
			i = 0
		case strings.HasPrefix(filepath.Base(p), ".a.tmp-"):
			i = 1
		}
		if i < 0 {
			return nil
		}
		once[i].Do(started.Done)
		select {
		case <-both:
		case <-time.After(time.Minute):
			t.Errorf("the fsync of %s waited a minute for the other to start: not made together", p)
		}
		return nil
	})()
	if err := MkdirWriteFiles(root, dir, 0o700, []File{{"a", []byte("a")}}); err != nil {
		t.Fatal(err)
	}
}

// An fsync that fails (here the parent of the directory made) fails the
// write with a SyncError naming the directory; no file is replaced and no
// temp file is left.
func TestMkdirWriteFilesSyncFailure(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "uid")
	defer SetSyncFault(func(p string) error {
		if p == root {
			return syscall.EIO
		}
		return nil
	})()
	err := MkdirWriteFiles(root, dir, 0o700, []File{{"a", []byte("a")}, {"b", []byte("b")}})
	var se *SyncError
	if !errors.As(err, &se) || se.Path != root || !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("err = %v; want a SyncError of %s, EIO, naming %s", err, root, dir)
	}
	assertOnlyNames(t, dir)
}

// A write that fails before the fsyncs (a file size limit) leaves the
// directories made with their parents fsynced, as MkdirAll leaves them,
// and no temp file.
func TestMkdirWriteFilesFailureBeforeTheFsyncs(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "pods", "uid")
	var mu sync.Mutex
	var synced []string
	defer SetTestHook(func(s Step, p string) {
		if s == ParentSynced {
			mu.Lock()
			synced = append(synced, strings.TrimPrefix(p, root+"/"))
			mu.Unlock()
		}
	})()
	restore := limitFileSize(t, 8<<20)
	err := MkdirWriteFiles(root, dir, 0o700, []File{{"a", []byte("a")}, {"big", make([]byte, 9<<20)}})
	restore()
	if err == nil {
		t.Fatal("a write past the file size limit succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(synced) != "[pods pods/uid]" {
		t.Errorf("parents fsynced of %v, want [pods pods/uid]", synced)
	}
	assertOnlyNames(t, dir)
}

func assertOnlyNames(t *testing.T, dir string, names ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, append([]string{}, names...)) {
		t.Errorf("%s holds %v, want %v", dir, got, names)
	}
}

// limitFileSize sets the process's file size limit (RLIMIT_FSIZE: a write
// past it fails with EFBIG; Go ignores SIGXFSZ) until restore, or the
// test's end. High enough for what else the test process writes meanwhile
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

// A file's fsync that fails fails Write with a SyncError naming the temp
// file; the target keeps its old content and no temp file is left.
func TestWriteSyncFailure(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	if err := Write(path, []byte("old")); err != nil {
		t.Fatal(err)
	}
	defer SetSyncFault(func(p string) error {
		if strings.HasPrefix(filepath.Base(p), ".state.json.tmp-") {
			return syscall.EIO
		}
		return nil
	})()
	err := Write(path, []byte("new"))
	var se *SyncError
	if !errors.As(err, &se) || !errors.Is(err, syscall.EIO) || !strings.HasPrefix(filepath.Base(se.Path), ".state.json.tmp-") {
		t.Fatalf("err = %v; want a SyncError of the temp file, EIO", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("content %q after a failed fsync, want old", got)
	}
	assertOnlyNames(t, dir, "state.json")
}
