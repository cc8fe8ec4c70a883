package tests

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// keeper is a pod that writes a marker into its emptyDir when it starts and
// runs until stopped: a restart or a lost volume shows.
func keeper(name, image string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 3
  volumes:
  - {name: data, emptyDir: {}}
  containers:
  - name: main
    image: %s
    command: ["sh", "-c", "echo started >> /data/marker; trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    volumeMounts:
    - {name: data, mountPath: /data}
`, name, image)
}

// running is what a running pod was at one moment.
type running struct {
	name string
	uid  string
	pid  int
}

func snapshot(d *daemon, name string) running {
	d.T.Helper()
	pod := d.WaitRunning(name, 60*time.Second)
	return running{name: name, uid: string(pod.UID), pid: containerPID(d, pod, "main")}
}

// untouched fails unless the pod is the same one, its container never
// restarted, not terminating, and its emptyDir still holds one marker.
func (r running) untouched(d *daemon) {
	d.T.Helper()
	pod := d.Pod(r.name)
	switch {
	case pod == nil:
		d.T.Errorf("pod %s is gone", r.name)
		return
	case string(pod.UID) != r.uid:
		d.T.Errorf("pod %s: UID %s, was %s", r.name, pod.UID, r.uid)
	case pod.DeletionTimestamp != nil:
		d.T.Errorf("pod %s is terminating", r.name)
	case len(pod.Status.ContainerStatuses) != 1 || pod.Status.ContainerStatuses[0].RestartCount != 0 || pod.Status.ContainerStatuses[0].State.Running == nil:
		d.T.Errorf("pod %s: container %+v", r.name, pod.Status.ContainerStatuses)
	}
	if !procAlive(r.pid) {
		d.T.Errorf("pod %s: container process %d is gone", r.name, r.pid)
	}
	marker := filepath.Join(d.RootDir, "pods", r.uid, "volumes", "kubernetes.io~empty-dir", "data", "marker")
	if b, err := os.ReadFile(marker); err != nil || string(b) != "started\n" {
		d.T.Errorf("pod %s: emptyDir marker %q (%v), want one start", r.name, b, err)
	}
}

// terminating waits until the pod is listed as terminating, or gone, and
// returns how long that took from since.
func terminating(d *daemon, name string, since time.Time) time.Duration {
	d.T.Helper()
	var took time.Duration
	d.Eventually(30*time.Second, name+" terminating", func() error {
		if p := d.Pod(name); p != nil && p.DeletionTimestamp == nil {
			return fmt.Errorf("%s still wanted", name)
		}
		took = time.Since(since)
		return nil
	})
	return took
}

// desiredWithin waits until the pods the daemon wants (listed, not
// terminating) are exactly names, and returns how long it took from since.
// Starting them may take longer: that is not the source's doing.
func desiredWithin(d *daemon, since time.Time, names ...string) time.Duration {
	d.T.Helper()
	var took time.Duration
	d.Eventually(30*time.Second, fmt.Sprintf("desired pods %v", names), func() error {
		var got []string
		for _, p := range d.Pods() {
			if p.DeletionTimestamp == nil {
				got = append(got, strings.TrimSuffix(p.Name, "-"+d.Name))
			}
		}
		if strings.Join(got, ",") != strings.Join(names, ",") {
			return fmt.Errorf("desired %v", got)
		}
		took = time.Since(since)
		return nil
	})
	return took
}

// withPath points the daemon's staticPodPath at path.
func withPath(d *daemon, path string) {
	d.T.Helper()
	cfg, err := os.ReadFile(d.Config)
	if err != nil {
		d.T.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte("staticPodPath: "+d.Manifests), []byte("staticPodPath: "+path), 1)
	if err := os.WriteFile(d.Config, cfg, 0o644); err != nil {
		d.T.Fatal(err)
	}
}

// removeAllUnder, as a cleanup registered after the daemon's, removes the
// manifests under dir first, so the daemon's own cleanup sees its pods go.
func removeAllUnder(t *testing.T, dirs ...string) {
	t.Cleanup(func() {
		for _, dir := range dirs {
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	})
}

func swapSymlink(t *testing.T, link, target string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(link), "."+filepath.Base(link)+".tmp")
	if err := os.Symlink(target, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil { // what ln -sfn does
		t.Fatal(err)
	}
}

// moveAway renames the manifest at path out of the manifest path, as an
// editor's first step of a save does: its pod goes settleTime later.
func moveAway(d *daemon, path string) {
	d.T.Helper()
	if err := os.Rename(path, filepath.Join(d.Dir, filepath.Base(path)+".away")); err != nil {
		d.T.Fatal(err)
	}
}

// A manifest unlinked and written again at once, as the kubelet's node e2e
// "should successfully recreate when file is removed and recreated" does: the
// pod is stopped and started again, same UID, its container's restart count
// 1, as the kubelet's REMOVE then ADD. Unlinked alone, its pod goes at once.
func TestManifestRemovedAndWrittenAgainRestartsPod(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	path := filepath.Join(d.Manifests, "web.yaml")
	body := keeper("web", "busybox")
	writeFile(t, path, body)
	d.Start()
	web := snapshot(d, "web")

	d.RemoveManifest("web.yaml")
	writeFile(t, path, body)
	restartedOnce(d, web)

	removed := time.Now()
	d.RemoveManifest("web.yaml")
	took := terminating(d, "web", removed)
	t.Logf("unlinked: pod terminating %s after rm", took.Round(time.Millisecond))
	// The status can say terminating before the daemon's log line has come
	// through its pipe.
	d.WaitLine(10*time.Second, `msg="manifest removed"`)
}

// restartedOnce waits until the pod r was is running again: same UID, its
// container restarted once, the first one gone.
func restartedOnce(d *daemon, r running) {
	d.T.Helper()
	d.Eventually(60*time.Second, r.name+" restarted once", func() error {
		p := d.Pod(r.name)
		if p == nil {
			return fmt.Errorf("no pod")
		}
		if string(p.UID) != r.uid {
			return fmt.Errorf("UID %s, want %s", p.UID, r.uid)
		}
		if cs := p.Status.ContainerStatuses; len(cs) != 1 || cs[0].RestartCount != 1 || cs[0].State.Running == nil {
			return fmt.Errorf("container %+v", cs)
		}
		return nil
	})
	if procAlive(r.pid) {
		d.T.Errorf("the first container of %s (pid %d) still runs", r.name, r.pid)
	}
}

// removalLogged reports whether the daemon's output out has the line saying
// that the manifest file was removed.
func removalLogged(out, file string) bool {
	for line := range strings.Lines(out) {
		if strings.Contains(line, `msg="manifest removed"`) &&
			(strings.Contains(line, " file="+file+" ") || strings.HasSuffix(line, " file="+file+"\n")) {
			return true
		}
	}
	return false
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// An editor saving an unchanged manifest by moving it away and writing it
// again (Emacs' first save, vim with backupcopy=no) leaves the pod alone: same
// container, emptyDir kept. The kubelet stops such a pod for its grace period,
// deletes its emptyDir and starts it again. A manifest moved away for good
// afterwards is acted on settleTime (500 ms) later. Both with a manifest
// directory and with staticPodPath naming the file itself.
func TestEditorSaveLeavesPodAlone(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"directory", "single-file"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			d := newDaemon(t)
			path := filepath.Join(d.Manifests, "web.yaml")
			body := keeper("web", "busybox")
			writeFile(t, path, body)
			if mode == "single-file" {
				withPath(d, path)
			}
			d.Start()
			web := snapshot(d, "web")

			for range 3 {
				if err := os.Rename(path, path+"~"); err != nil {
					t.Fatal(err)
				}
				writeFile(t, path, body)
				if err := os.Remove(path + "~"); err != nil {
					t.Fatal(err)
				}
			}
			if mode == "single-file" {
				// Moving the file itself away is the signal: once the pod
				// is terminating, the saves' settleTime has passed too.
				removed := time.Now()
				moveAway(d, path)
				t.Logf("moved away for good: pod terminating %s after mv", terminating(d, "web", removed).Round(time.Millisecond))
				// The status can say terminating before the daemon's log line
				// has come through its pipe: wait for the real removal's line,
				// then count (a save taken as a removal logs before it).
				out := d.WaitOutput(10*time.Second, "the removal logged", func(out string) bool {
					return strings.Contains(out, `msg="manifest removed"`)
				})
				if strings.Count(out, `msg="manifest removed"`) != 1 {
					t.Errorf("the saves were taken as removals:\n%s", out)
				}
				return
			}
			// A second pod moved away after the saves: once it is
			// terminating, web's settleTime has passed too.
			d.WriteManifest("canary.yaml", sleeper("canary", ""))
			d.WaitRunning("canary", 60*time.Second)
			removed := time.Now()
			moveAway(d, filepath.Join(d.Manifests, "canary.yaml"))
			took := terminating(d, "canary", removed)
			t.Logf("moved away for good: pod terminating %s after mv", took.Round(time.Millisecond))
			if took > 2*time.Second {
				t.Errorf("a removed manifest's pod was wanted for %s", took)
			}
			web.untouched(d)
			// A save taken as web's removal would have been logged before
			// canary's removal: wait for that line, then look for web's.
			d.WaitOutput(10*time.Second, "canary's removal logged", func(out string) bool {
				return removalLogged(out, filepath.Join(d.Manifests, "canary.yaml"))
			})
			if out := d.Output(); removalLogged(out, path) {
				t.Errorf("web was taken as removed:\n%s", out)
			}
		})
	}
}

// staticPodPath is a symlink (.../current) that configuration management
// swaps with `ln -sfn`: the new target's pod set is wanted within a second,
// a manifest the same in both versions keeps its pod, and the old target is
// no longer watched.
func TestStaticPodPathSymlinkSwap(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	v1dir, v2dir := filepath.Join(d.Dir, "v1"), filepath.Join(d.Dir, "v2")
	writeFile(t, filepath.Join(v1dir, "same.yaml"), keeper("same", "busybox"))
	writeFile(t, filepath.Join(v1dir, "old.yaml"), sleeper("old", ""))
	writeFile(t, filepath.Join(v2dir, "same.yaml"), keeper("same", "busybox"))
	writeFile(t, filepath.Join(v2dir, "new.yaml"), sleeper("new", ""))
	current := filepath.Join(d.Dir, "current")
	swapSymlink(t, current, "v1")
	withPath(d, current)
	removeAllUnder(t, v1dir, v2dir)
	d.Start()
	same := snapshot(d, "same")
	d.WaitRunning("old", 60*time.Second)

	swapped := time.Now()
	swapSymlink(t, current, "v2")
	took := desiredWithin(d, swapped, "new", "same")
	t.Logf("the swapped set was wanted %s after the swap", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("the swap took %s to be acted on, want about a second at most", took)
	}
	d.WaitRunning("new", 60*time.Second)
	same.untouched(d)

	written := time.Now()
	writeFile(t, filepath.Join(v2dir, "more.yaml"), sleeper("more", ""))
	t.Logf("a manifest added to the new target was wanted after %s", desiredWithin(d, written, "more", "new", "same").Round(time.Millisecond))
}

// Manifests that are symlinks into a versioned directory, itself reached
// through a symlink swapped to roll out a new version: the changed pod is
// replaced within about a second, the unchanged one is left alone.
func TestSymlinkedManifestsRollOut(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	versions := filepath.Join(d.Dir, "versions")
	writeFile(t, filepath.Join(versions, "1", "api.yaml"), keeper("api", "busybox"))
	writeFile(t, filepath.Join(versions, "1", "etcd.yaml"), keeper("etcd", "busybox"))
	writeFile(t, filepath.Join(versions, "2", "api.yaml"), keeper("api", "busybox"))
	writeFile(t, filepath.Join(versions, "2", "etcd.yaml"), keeper("etcd", "busybox:latest"))
	swapSymlink(t, filepath.Join(versions, "current"), "1")
	for _, name := range []string{"api.yaml", "etcd.yaml"} {
		if err := os.Symlink(filepath.Join("..", "versions", "current", name), filepath.Join(d.Manifests, name)); err != nil {
			t.Fatal(err)
		}
	}
	d.Start()
	api, etcd := snapshot(d, "api"), snapshot(d, "etcd")

	swapped := time.Now()
	swapSymlink(t, filepath.Join(versions, "current"), "2")
	d.Eventually(30*time.Second, "etcd replaced", func() error {
		p := d.Pod("etcd")
		if p == nil || string(p.UID) == etcd.uid {
			return fmt.Errorf("etcd not replaced yet")
		}
		return nil
	})
	took := time.Since(swapped)
	t.Logf("the new etcd was wanted %s after the swap (the old one stopped first)", took.Round(time.Millisecond))
	snapshot(d, "etcd")
	api.untouched(d)
}

// The manifest directory deleted and made again at once with the same
// manifests (rm -rf; cp -r) unlinked them: the pod is restarted, same UID,
// restart count 1, as by the kubelet; deleted and left away, its pods go at
// once and come back with it. A directory missing at start is found when made,
// without waiting for a relist.
func TestManifestDirectoryComesAndGoes(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := filepath.Join(d.Dir, "later", "manifests")
	withPath(d, dir)
	removeAllUnder(t, dir)
	d.Start()
	made := time.Now()
	writeFile(t, filepath.Join(dir, "web.yaml"), keeper("web", "busybox"))
	t.Logf("a directory made after start: its pod wanted after %s", desiredWithin(d, made, "web").Round(time.Millisecond))
	web := snapshot(d, "web")

	fill := func() {
		writeFile(t, filepath.Join(dir, "web.yaml"), keeper("web", "busybox"))
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	fill()
	restartedOnce(d, web)

	gone := time.Now()
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("the directory removed: its pod terminating after %s", terminating(d, "web", gone).Round(time.Millisecond))
	fill()
	d.WaitRunning("web", 60*time.Second)
}

// An inotify queue that overflows loses events; the daemon lists again and
// converges. The daemon is stopped (SIGSTOP: its pods run on) while more
// events than its queue holds happen next to the manifest directory, then a
// manifest is added and one removed, whose events are lost.
func TestInotifyOverflowConverges(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("a.yaml", sleeper("a", ""))
	d.Start()
	d.WaitRunning("a", 60*time.Second)
	b, err := os.ReadFile("/proc/sys/fs/inotify/max_queued_events")
	if err != nil {
		t.Fatal(err)
	}
	var queue int
	fmt.Sscan(string(b), &queue)

	d.Signal(syscall.SIGSTOP)
	stopped := true
	defer func() {
		if stopped {
			d.Signal(syscall.SIGCONT)
		}
	}()
	noise := filepath.Join(d.Dir, "noise")
	for i := range queue + 4096 {
		p := fmt.Sprintf("%s-%d", noise, i)
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
		os.Remove(p)
	}
	d.WriteManifest("b.yaml", sleeper("b", ""))
	d.RemoveManifest("a.yaml")
	resumed := time.Now()
	d.Signal(syscall.SIGCONT)
	stopped = false
	took := desiredWithin(d, resumed, "b")
	t.Logf("converged %s after the daemon resumed", took.Round(time.Millisecond))
	if took > 2*time.Second {
		t.Errorf("took %s to converge after an overflow", took)
	}
	d.WaitLine(10*time.Second, "inotify queue overflowed")
	d.WaitRunning("b", 60*time.Second)
}

// A manifest that is there but cannot be read keeps its pod running, with a
// problem naming the file; readable again and unchanged, nothing happens. The
// file is a symlink to /proc/self/mem: a regular file whose read fails with
// EIO, for root too.
func TestUnreadableManifestKeepsPod(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	body := keeper("app", "busybox")
	d.WriteManifest("app.yaml", body)
	d.Start()
	app := snapshot(d, "app")
	path := filepath.Join(d.Manifests, "app.yaml")
	swapSymlink(t, path, "/proc/self/mem")
	d.Eventually(10*time.Second, "a problem for app.yaml", func() error {
		out, _ := d.CLIErr("ps")
		if !strings.Contains(out, path) || !strings.Contains(out, "input/output error") {
			return fmt.Errorf("ps:\n%s", out)
		}
		return nil
	})
	app.untouched(d)
	d.WriteManifest("app.yaml", body)
	d.Eventually(10*time.Second, "the problem gone", func() error {
		if out, _ := d.CLIErr("ps"); strings.Contains(out, path) {
			return fmt.Errorf("ps:\n%s", out)
		}
		return nil
	})
	app.untouched(d)
}

// The last good pod of a manifest that turned invalid is kept across a
// daemon restart: stored with the pod's state, it is run again (the same
// container, adopted) while the manifest stays invalid, and the problem is
// shown. Fixed back to the same content, nothing happens.
func TestLastGoodPodSurvivesRestart(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	body := keeper("web", "busybox")
	d.WriteManifest("web.yaml", body)
	d.Start()
	web := snapshot(d, "web")
	kept := filepath.Join(d.RootDir, "pods", web.uid, "manifest.json")
	d.Eventually(10*time.Second, "the manifest kept with the pod", func() error {
		_, err := os.Stat(kept)
		return err
	})
	d.Stop()
	// The run dir's lock is sometimes still held for a moment after the
	// daemon exited (seen under load; not this test's subject): wait for it.
	d.Eventually(10*time.Second, "the run dir's lock free", func() error {
		f, err := os.Open(filepath.Join(d.RunDir, "staticpodd.lock"))
		if err != nil {
			return err
		}
		defer f.Close()
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			return fmt.Errorf("held: %w", err)
		}
		return syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	})

	invalid := strings.Replace(body, "terminationGracePeriodSeconds: 3", "terminationGracePeriodSeconds: 3\n  restartPolicy: Sometimes", 1)
	d.WriteManifest("web.yaml", invalid)
	old := time.Now().Add(-time.Hour) // not a file being written
	os.Chtimes(filepath.Join(d.Manifests, "web.yaml"), old, old)
	d.Start()
	d.Eventually(20*time.Second, "the problem shown", func() error {
		out, _ := d.CLIErr("ps")
		if !strings.Contains(out, `spec.restartPolicy: Unsupported value: "Sometimes"`) {
			return fmt.Errorf("ps:\n%s", out)
		}
		return nil
	})
	web.untouched(d)
	// The daemon says it runs the kept pod.
	d.WaitLine(10*time.Second, "running the last good pod kept with its state")
	d.WriteManifest("web.yaml", body)
	d.Eventually(10*time.Second, "the problem gone", func() error {
		if out, _ := d.CLIErr("ps"); strings.Contains(out, "Sometimes") {
			return fmt.Errorf("ps:\n%s", out)
		}
		return nil
	})
	web.untouched(d)
	if p := d.Pod("web"); p != nil && p.Status.Phase != v1.PodRunning {
		t.Errorf("phase %s", p.Status.Phase)
	}
}
