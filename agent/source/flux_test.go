package source

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a log the test reads while the source writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startLogged is start with the source's log kept; out is unbuffered, so the
// source waits in its send until the test reads.
func startLogged(t *testing.T, path string, period time.Duration) (<-chan Update, *syncBuffer) {
	t.Helper()
	log := &syncBuffer{}
	ctx, cancel := context.WithCancel(context.Background())
	out := make(chan Update)
	done := make(chan error, 1)
	src := NewFile(path, "node1", period, nil, slog.New(slog.NewTextHandler(log, nil)))
	go func() { done <- src.Run(ctx, out) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if t.Failed() {
			t.Logf("source log:\n%s", log)
		}
	})
	return out, log
}

// editorSave saves path the way Emacs (first save) and vim with
// backupcopy=no do: the file is moved away, written again, and the backup
// removed.
func editorSave(t *testing.T, path, body string) {
	t.Helper()
	if err := os.Rename(path, path+"~"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, body)
	if err := os.Remove(path + "~"); err != nil {
		t.Fatal(err)
	}
}

// An editor saving an unchanged manifest moves it away for a moment: no
// update at all, so the pod is neither stopped nor started again. This is the
// kubelet's podDelete on IN_MOVED_FROM, which stops the pod for its grace
// period and deletes its emptyDir.
func TestEditorSaveIsNoChange(t *testing.T) {
	for _, mode := range []string{"directory", "single file"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "web.yaml")
			body := podYAML("web", "busybox:1.36")
			writeFile(t, path, body)
			watched := dir
			if mode == "single file" {
				watched = path
			}
			ch, _ := startLogged(t, watched, time.Hour)
			if u := next(t, ch); !hasPods("web-node1")(u) {
				t.Fatalf("first update %s", describe(u))
			}
			for range 5 {
				editorSave(t, path, body)
			}
			quiet(t, ch, 2*settleTime)

			// The same save with an edit is an edit.
			editorSave(t, path, podYAML("web", "busybox:1.37"))
			u := waitFor(t, ch, "the edit", func(u Update) bool {
				return len(u.Pods) == 1 && u.Pods[0].Spec.Containers[0].Image == "busybox:1.37"
			})
			if len(u.Problems) != 0 {
				t.Errorf("problems %v", u.Problems)
			}
		})
	}
}

// A manifest renamed away leaves the set settleTime after it went, and not
// before: the time an editor gets to write it back. One unlinked (rm) leaves
// it at once, as with the kubelet.
func TestRemovalTakesSettleTime(t *testing.T) {
	for _, mode := range []string{"directory", "single file"} {
		for _, how := range []string{"renamed away", "unlinked"} {
			t.Run(mode+"/"+how, func(t *testing.T) {
				dir := t.TempDir()
				path := filepath.Join(dir, "web.yaml")
				writeFile(t, path, podYAML("web", "busybox"))
				watched := dir
				if mode == "single file" {
					watched = path
				}
				ch, log := startLogged(t, watched, time.Hour)
				next(t, ch)
				removed := time.Now()
				var err error
				if how == "unlinked" {
					err = os.Remove(path)
				} else {
					err = os.Rename(path, filepath.Join(t.TempDir(), "web.yaml"))
				}
				if err != nil {
					t.Fatal(err)
				}
				waitFor(t, ch, "no pods", hasPods())
				took := time.Since(removed)
				t.Logf("removal reached the pod set after %s", took.Round(time.Millisecond))
				switch {
				case how == "unlinked" && took >= settleTime:
					t.Errorf("unlink took %s, want less than settleTime (%s)", took, settleTime)
				case how == "renamed away" && (took < settleTime || took > settleTime+time.Second):
					t.Errorf("removal took %s, want settleTime (%s) and at most a second more", took, settleTime)
				}
				if !strings.Contains(log.String(), `msg="manifest removed"`) {
					t.Errorf("no log line says the manifest was removed:\n%s", log)
				}
			})
		}
	}
}

// A manifest unlinked and written again at once (the kubelet's node e2e
// "should successfully recreate when file is removed and recreated") keeps
// its pod, same UID, with a higher Recreated token each time: the agent
// restarts the pod, as the kubelet's REMOVE then ADD does. An editor's save
// (rename away and back) gives no token.
func TestUnlinkedAndWrittenAgainIsRecreated(t *testing.T) {
	for _, mode := range []string{"directory", "single file"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "web.yaml")
			body := podYAML("web", "busybox")
			writeFile(t, path, body)
			watched := dir
			if mode == "single file" {
				watched = path
			}
			ch, _ := startLogged(t, watched, time.Hour)
			first := next(t, ch)
			if !hasPods("web-node1")(first) || first.Pods[0].Recreated != 0 {
				t.Fatalf("first update %s, recreated %d", describe(first), first.Pods[0].Recreated)
			}
			var token uint64
			for i := range 2 {
				if err := os.Remove(path); err != nil {
					t.Fatal(err)
				}
				writeFile(t, path, body)
				u := waitFor(t, ch, fmt.Sprintf("recreation %d", i+1), func(u Update) bool {
					return len(u.Pods) == 1 && u.Pods[0].Recreated > token
				})
				if u.Pods[0].UID != first.Pods[0].UID {
					t.Errorf("UID %s after recreation, want %s", u.Pods[0].UID, first.Pods[0].UID)
				}
				token = u.Pods[0].Recreated
			}
			editorSave(t, path, body)
			quiet(t, ch, 2*settleTime)
		})
	}
}

// staticPodPath is a symlink that configuration management swaps atomically
// (`ln -sfn v2 current`, which renames a new link over the old one): the new
// target is read within a second (the period is an hour), and it is the new
// target that is watched from then on.
func TestStaticPodPathSymlinkSwapped(t *testing.T) {
	root := t.TempDir()
	v1, v2 := filepath.Join(root, "v1"), filepath.Join(root, "v2")
	for _, d := range []string{v1, v2} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(v1, "a.yaml"), podYAML("a", "busybox:1"))
	writeFile(t, filepath.Join(v1, "b.yaml"), podYAML("b", "busybox:1"))
	writeFile(t, filepath.Join(v2, "a.yaml"), podYAML("a", "busybox:2"))
	writeFile(t, filepath.Join(v2, "c.yaml"), podYAML("c", "busybox:1"))
	current := filepath.Join(root, "current")
	swap := func(target string) {
		t.Helper()
		tmp := current + ".tmp"
		if err := os.Symlink(target, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, current); err != nil {
			t.Fatal(err)
		}
	}
	swap("v1")
	ch, _ := startLogged(t, current, time.Hour)
	if u := next(t, ch); !hasPods("a-node1", "b-node1")(u) {
		t.Fatalf("first update %s", describe(u))
	}
	swapped := time.Now()
	swap("v2")
	u := waitFor(t, ch, "v2's pods", hasPods("a-node1", "c-node1"))
	if u.Pods[0].Spec.Containers[0].Image != "busybox:2" {
		t.Errorf("a after the swap runs %s", u.Pods[0].Spec.Containers[0].Image)
	}
	if took := time.Since(swapped); took > time.Second {
		t.Errorf("the swap took %s to be seen", took)
	}
	// v1 is no longer what the path leads to: changing it changes nothing.
	writeFile(t, filepath.Join(v1, "d.yaml"), podYAML("d", "busybox"))
	quiet(t, ch, 300*time.Millisecond)
	writeFile(t, filepath.Join(v2, "d.yaml"), podYAML("d", "busybox"))
	waitFor(t, ch, "d in v2", hasPods("a-node1", "c-node1", "d-node1"))
}

// Manifests that are symlinks into a versioned directory, itself reached
// through a symlink that is swapped (as configuration tools and Kubernetes'
// own atomic writer do with ..data): a swap, and an edit in place in the
// directory they lead to, are seen within a second with an hour's period.
func TestSymlinkedManifestsIntoVersionedDirectory(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "manifests")
	versions := filepath.Join(root, "versions")
	for _, d := range []string{dir, filepath.Join(versions, "1"), filepath.Join(versions, "2")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(versions, "1", "etcd.yaml"), podYAML("etcd", "etcd:1"))
	writeFile(t, filepath.Join(versions, "2", "etcd.yaml"), podYAML("etcd", "etcd:2"))
	if err := os.Symlink("1", filepath.Join(versions, "current")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../versions/current/etcd.yaml", filepath.Join(dir, "etcd.yaml")); err != nil {
		t.Fatal(err)
	}
	image := func(want string) func(Update) bool {
		return func(u Update) bool { return len(u.Pods) == 1 && u.Pods[0].Spec.Containers[0].Image == want }
	}
	ch, _ := startLogged(t, dir, time.Hour)
	if u := next(t, ch); !image("etcd:1")(u) {
		t.Fatalf("first update %s", describe(u))
	}
	tmp := filepath.Join(versions, ".current.tmp")
	if err := os.Symlink("2", tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(versions, "current")); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "etcd:2 after the swap", image("etcd:2"))
	writeFile(t, filepath.Join(versions, "2", "etcd.yaml"), podYAML("etcd", "etcd:3"))
	waitFor(t, ch, "etcd:3 after an edit in place", image("etcd:3"))
	// The old version's directory changing says nothing.
	writeFile(t, filepath.Join(versions, "1", "etcd.yaml"), podYAML("etcd", "etcd:9"))
	quiet(t, ch, 300*time.Millisecond)
}

// The manifest directory deleted and made again at once, as a provisioning
// tool or `rm -rf; cp -r` does, with the same manifests: its manifests were
// unlinked, so their pods are recreated (same UIDs, new Recreated tokens), as
// the kubelet's IN_DELETEs restart them. Left away: the pods go, and come
// back with the files.
func TestDirectoryDeletedAndMadeAgain(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "manifests")
	fill := func() {
		t.Helper()
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, "a.yaml"), podYAML("a", "busybox"))
		writeFile(t, filepath.Join(dir, "b.yaml"), podYAML("b", "busybox"))
	}
	fill()
	ch, _ := startLogged(t, dir, time.Hour)
	if u := next(t, ch); !hasPods("a-node1", "b-node1")(u) {
		t.Fatalf("first update %s", describe(u))
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	fill()
	waitFor(t, ch, "both pods recreated", func(u Update) bool {
		return hasPods("a-node1", "b-node1")(u) && u.Pods[0].Recreated > 0 && u.Pods[1].Recreated > 0
	})

	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	waitFor(t, ch, "no pods once the directory stayed away", hasPods())
	fill()
	waitFor(t, ch, "the pods back", hasPods("a-node1", "b-node1"))
}

// A file that is there but cannot be read keeps its pod, with a problem
// saying why; readable again and unchanged, nothing happens. The file is a
// symlink to /proc/self/mem, which opens as a regular file and fails to read
// (EIO) whoever reads it, root included.
func TestUnreadableFileKeepsItsPod(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "app.yaml")
	body := podYAML("app", "busybox")
	writeFile(t, path, body)
	ch, _ := startLogged(t, dir, time.Hour)
	good := next(t, ch)
	tmp := filepath.Join(dir, ".app.tmp")
	if err := os.Symlink("/proc/self/mem", tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	u := waitFor(t, ch, "a problem", func(u Update) bool { return len(u.Problems) == 1 })
	if !hasPods("app-node1")(u) || u.Pods[0].UID != good.Pods[0].UID {
		t.Errorf("update %s: want the pod kept", describe(u))
	}
	if p := u.Problems[0]; p.Origin != path || !strings.Contains(p.Err.Error(), "input/output error") {
		t.Errorf("problem %s: %v", p.Origin, p.Err)
	}
	renameIn(t, dir, "app.yaml", body)
	u = waitFor(t, ch, "no problem", func(u Update) bool { return len(u.Problems) == 0 })
	if !hasPods("app-node1")(u) || u.Pods[0].UID != good.Pods[0].UID {
		t.Errorf("update %s: want the same pod", describe(u))
	}
}

// FIFOs, sockets and device nodes are skipped with one warning each, never
// opened (a FIFO would block the open); however many lists run.
func TestSpecialFilesSkippedOnce(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "good.yaml"), podYAML("good", "busybox"))
	mkfifo(t, filepath.Join(dir, "fifo.yaml"))
	if err := os.Symlink("/dev/null", filepath.Join(dir, "null.yaml")); err != nil {
		t.Fatal(err)
	}
	ch, log := startLogged(t, dir, 20*time.Millisecond)
	if u := next(t, ch); !hasPods("good-node1")(u) || len(u.Problems) != 0 {
		t.Fatalf("first update %s", describe(u))
	}
	quiet(t, ch, 300*time.Millisecond) // fifteen relists
	for _, name := range []string{"fifo.yaml", "null.yaml"} {
		if n := strings.Count(log.String(), "file="+filepath.Join(dir, name)); n != 1 {
			t.Errorf("%s named %d times in the log, want once:\n%s", name, n, log)
		}
	}
}

// An inotify queue that overflows loses events: the source lists everything
// again and converges. The source is held in its send while more events than
// the queue holds happen in the manifest directory's parent (events the
// source watches but ignores: no list comes of them), then the real change is
// made in the manifest directory, whose events are lost. Only the overflow
// can make the source list again before its period (an hour).
func TestInotifyOverflowListsAgain(t *testing.T) {
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Fatal(err)
	}
	queue, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	dir := filepath.Join(root, "manifests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "a.yaml"), podYAML("a", "busybox"))
	ch, log := startLogged(t, dir, time.Hour)
	next(t, ch)
	// The source lists and waits to send; it reads no events meanwhile. b's
	// unknown field is logged during the list: then it is on its way there.
	writeFile(t, filepath.Join(dir, "b.yaml"), podYAML("b", "busybox")+"  marker: listed\n")
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(log.String(), "spec.marker"); {
		if time.Now().After(deadline) {
			t.Fatalf("b was not listed within 5s:\n%s", log)
		}
		time.Sleep(time.Millisecond)
	}
	// Twice the queue: fsnotify holds up to a 4096-event buffer of them too.
	for i := range queue + 4096 {
		p := filepath.Join(root, fmt.Sprintf("noise-%d", i))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		os.Remove(p)
	}
	writeFile(t, filepath.Join(dir, "c.yaml"), podYAML("c", "busybox"))
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	if u := next(t, ch); !hasPods("a-node1", "b-node1")(u) {
		t.Fatalf("the update held back: %s", describe(u))
	}
	waitFor(t, ch, "b and c", hasPods("b-node1", "c-node1"))
	if !strings.Contains(log.String(), "inotify queue overflowed") {
		t.Errorf("no overflow logged:\n%s", log)
	}
}
