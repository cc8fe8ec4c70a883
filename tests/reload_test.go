package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// reloadConfig rewrites the daemon's config file: its first content with
// each "key:" line of set replacing the one there (or added), then sends
// SIGHUP and waits for the reload's READY=1, which comes once the new
// configuration is applied. It returns that message.
func reloadConfig(t *testing.T, d *daemon, sock *notifySocket, base string, set ...string) string {
	t.Helper()
	tmp := d.Config + ".new"
	if err := os.WriteFile(tmp, []byte(withLines(base, set...)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, d.Config); err != nil {
		t.Fatal(err)
	}
	d.Signal(syscall.SIGHUP)
	sock.next(t, "RELOADING=1", 10*time.Second)
	return sock.next(t, "READY=1", 30*time.Second)
}

// withLines is config with each "key:" line of set replacing the one there
// (or added).
func withLines(config string, set ...string) string {
	lines := strings.Split(strings.TrimRight(config, "\n"), "\n")
	for _, s := range set {
		key, _, _ := strings.Cut(s, ":")
		replaced := false
		for i, l := range lines {
			if strings.HasPrefix(l, key+":") {
				lines[i], replaced = s, true
			}
		}
		if !replaced {
			lines = append(lines, s)
		}
	}
	return strings.Join(lines, "\n") + "\n"
}

// runningPod is pod name's UID and the host PID of its container main, once
// it runs.
func runningPod(t *testing.T, d *daemon, name string) (string, int) {
	t.Helper()
	p := d.WaitRunning(name, 60*time.Second)
	return string(p.UID), containerPID(d, p, "main")
}

// untouched fails the test unless pod name still runs as the same UID with
// the same container process.
func untouched(t *testing.T, d *daemon, name, uid string, pid int) {
	t.Helper()
	p := d.Pod(name)
	if p == nil {
		t.Fatalf("pod %s is gone", name)
	}
	if string(p.UID) != uid || !procAlive(pid) || containerPID(d, p, "main") != pid {
		t.Errorf("pod %s was touched: UID %s (was %s), container pid %d alive %v", name, p.UID, uid, pid, procAlive(pid))
	}
	if cs := mainContainer(t, p); cs.RestartCount != 0 || cs.State.Running == nil {
		t.Errorf("pod %s restarted: %+v", name, cs)
	}
}

// systemctl reload applies the manifest sources live: a new header for the
// URL, a new staticPodPath (the old directory's pods stop, the new one's
// start), the URL removed (its pods stop); the other source's pods are never
// touched. A configuration that does not load is refused whole, named in
// STATUS=, and changes nothing.
func TestReloadAppliesSources(t *testing.T) {
	t.Parallel()
	srv := newManifestServer(t, sleeperList("1", "u"))
	srv.RequireHeader("Authorization", "Bearer one")
	d := newDaemon(t)
	sock, path := newNotifySocket(t)
	d.Env = []string{"NOTIFY_SOCKET=" + path}
	b, err := os.ReadFile(d.Config)
	if err != nil {
		t.Fatal(err)
	}
	base := string(b) + fmt.Sprintf("staticPodURL: %s\nhttpCheckFrequency: 1s\nstaticPodURLHeader: {Authorization: [\"Bearer one\"]}\n", srv.URL())
	if err := os.WriteFile(d.Config, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	d.WriteManifest("a.yaml", sleeper("a", ""))
	d.Start()
	sock.next(t, "READY=1", 60*time.Second)
	aUID, aPID := runningPod(t, d, "a")
	uUID, uPID := runningPod(t, d, "u")

	// The server wants another token: the URL fails, its pods stay; a
	// reload with the new header makes it answer again, nothing restarts.
	srv.RequireHeader("Authorization", "Bearer two")
	sock.next(t, "manifest URL "+srv.URL(), 15*time.Second)
	reloadConfig(t, d, sock, base, `staticPodURLHeader: {Authorization: ["Bearer two"]}`)
	base = strings.Replace(base, "Bearer one", "Bearer two", 1)
	healthz := fmt.Sprintf("http://127.0.0.1:%d/healthz?verbose", d.Port)
	d.Eventually(15*time.Second, "the URL answers with the new header", func() error {
		if _, body := httpGet(t, healthz); !strings.Contains(body, "[+]manifest-url ok") {
			return fmt.Errorf("/healthz?verbose:\n%s", body)
		}
		return nil
	})
	untouched(t, d, "u", uUID, uPID)
	untouched(t, d, "a", aUID, aPID)

	// A new staticPodPath: a (only in the old directory) stops, b starts;
	// the URL's pod is not touched.
	dir2 := filepath.Join(d.Dir, "manifests2")
	if err := os.MkdirAll(dir2, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir2, "b.yaml"), []byte(sleeper("b", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	reloadConfig(t, d, sock, base, "staticPodPath: "+dir2)
	base = strings.Replace(base, "staticPodPath: "+d.Manifests, "staticPodPath: "+dir2, 1)
	bUID, bPID := runningPod(t, d, "b")
	d.Eventually(30*time.Second, "pod a stopped with its directory's source", func() error {
		if d.Pod("a") != nil || procAlive(aPID) {
			return fmt.Errorf("pod a still there (container alive: %v)", procAlive(aPID))
		}
		return nil
	})
	untouched(t, d, "u", uUID, uPID)

	// A manifest written into the old directory now is not read; one in
	// the new directory is.
	d.WriteManifest("c.yaml", sleeper("c", ""))
	if err := os.WriteFile(filepath.Join(dir2, "d.yaml"), []byte(sleeper("d", "")), 0o644); err != nil {
		t.Fatal(err)
	}
	d.WaitRunning("d", 60*time.Second)
	if d.Pod("c") != nil {
		t.Error("a manifest of the former staticPodPath was started")
	}

	// A configuration that does not load: refused whole, STATUS= names the
	// file and the field, the sources stay as they were.
	bad := reloadConfig(t, d, sock, base, "staticPodURL: ", "containerLogMaxFiles: 1")
	if !strings.Contains(bad, "configuration not reloaded") || !strings.Contains(bad, d.Config) || !strings.Contains(bad, "containerLogMaxFiles") {
		t.Errorf("STATUS= after a bad reload %q does not say the configuration was refused, naming file and field", bad)
	}
	// The URL source still polls, with the header in use: two polls
	// answered, and nothing stopped.
	polled := srv.Served()
	d.Eventually(15*time.Second, "two polls of the URL after the refused reload", func() error {
		if n := srv.Served() - polled; n < 2 {
			return fmt.Errorf("%d polls answered", n)
		}
		return nil
	})
	untouched(t, d, "u", uUID, uPID)
	untouched(t, d, "b", bUID, bPID)

	// The URL removed: its pod stops, the file's stay.
	good := reloadConfig(t, d, sock, base, "staticPodURL: ")
	if strings.Contains(good, "not reloaded") || strings.Contains(good, "restart to apply") {
		t.Errorf("STATUS= after a good reload %q still says something is not applied", good)
	}
	d.Eventually(30*time.Second, "pod u stopped with the URL source", func() error {
		if d.Pod("u") != nil || procAlive(uPID) {
			return fmt.Errorf("pod u still there (container alive: %v)", procAlive(uPID))
		}
		return nil
	})
	untouched(t, d, "b", bUID, bPID)
	if _, body := httpGet(t, healthz); strings.Contains(body, "manifest-url") {
		t.Errorf("/healthz?verbose still checks the removed URL:\n%s", body)
	}

	// A field that needs a restart is reported as such, and nothing else.
	msg := reloadConfig(t, d, sock, strings.Replace(base, "staticPodURL: "+srv.URL(), "staticPodURL: ", 1), "podPidsLimit: 200")
	if !strings.Contains(msg, "restart to apply podPidsLimit") {
		t.Errorf("STATUS= %q does not say podPidsLimit needs a restart", msg)
	}
	untouched(t, d, "b", bUID, bPID)

	// Back to the first directory and no URL: what the test's cleanup
	// expects, and the path change the other way.
	reloadConfig(t, d, sock, string(b))
	d.WaitRunning("c", 60*time.Second)
}

// containerLogMaxSize and containerLogMaxFiles changed by a reload rotate
// the logs of a container that runs already, without restarting it, and
// fewer files removes the oldest at once.
func TestReloadLogRotationRunningContainer(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	sock, path := newNotifySocket(t)
	d.Env = []string{"NOTIFY_SOCKET=" + path}
	b, err := os.ReadFile(d.Config)
	if err != nil {
		t.Fatal(err)
	}
	base := string(b) + "containerLogMaxSize: \"-1\"\n"
	if err := os.WriteFile(d.Config, []byte(base), 0o644); err != nil {
		t.Fatal(err)
	}
	// About 5 KB/s of output.
	d.WriteManifest("chatty.yaml", sleeper("chatty", "")[:strings.Index(sleeper("chatty", ""), "    command:")]+
		"    command: [\"sh\", \"-c\", \"trap 'exit 0' TERM; while true; do seq 1 200; sleep 0.2 & wait $!; done\"]\n")
	d.Start()
	sock.next(t, "READY=1", 60*time.Second)
	uid, pid := runningPod(t, d, "chatty")
	logDir := filepath.Join(d.LogsDir, "default_chatty-"+d.Name+"_"+uid, "main")
	logFiles := func() []string {
		ents, _ := os.ReadDir(logDir)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	d.Eventually(20*time.Second, "the live log past 12 KiB", func() error {
		fi, err := os.Stat(filepath.Join(logDir, "0.log"))
		if err != nil || fi.Size() < 12<<10 {
			return fmt.Errorf("log files %v", logFiles())
		}
		return nil
	})
	if fs := logFiles(); len(fs) != 1 {
		t.Fatalf("log rotated with rotation off: %v", fs)
	}

	reloadConfig(t, d, sock, base, "containerLogMaxSize: 8Ki", "containerLogMaxFiles: 4")
	d.Eventually(30*time.Second, "four log files, the live one under 8 KiB", func() error {
		fs := logFiles()
		fi, err := os.Stat(filepath.Join(logDir, "0.log"))
		if err != nil || len(fs) != 4 || fi.Size() > 8<<10 {
			return fmt.Errorf("log files %v", fs)
		}
		return nil
	})
	untouched(t, d, "chatty", uid, pid)

	reloadConfig(t, d, sock, base, "containerLogMaxSize: 8Ki", "containerLogMaxFiles: 2")
	d.Eventually(10*time.Second, "two log files", func() error {
		if fs := logFiles(); len(fs) != 2 {
			return fmt.Errorf("log files %v", fs)
		}
		return nil
	})
	// And it stays so as the container writes on: never more than two over
	// five rotations (the live file's inode changes; two rotations between
	// looks count as one). A listing that races a rotation may see one, as
	// under the kubelet: the oldest rotated file goes before the live one is
	// renamed.
	var live uint64
	rotations := 0
	d.Eventually(30*time.Second, "five more rotations", func() error {
		if fs := logFiles(); len(fs) > 2 {
			t.Fatalf("log files %v, want at most 2", fs)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(logDir, "0.log"), &st); err == nil {
			if live != 0 && st.Ino != live {
				rotations++
			}
			live = st.Ino
		}
		if rotations < 5 {
			return fmt.Errorf("%d rotations seen", rotations)
		}
		return nil
	})
	d.Eventually(10*time.Second, "two log files still", func() error {
		if fs := logFiles(); len(fs) != 2 {
			return fmt.Errorf("log files %v", fs)
		}
		return nil
	})
	untouched(t, d, "chatty", uid, pid)
}

// Eviction thresholds set by a reload act at once: a daemon started with
// none evicts the pod that holds the node's memory once evictionHard is
// reloaded, and then, with the thresholds removed again, the pod comes
// back at once.
func TestReloadEvictionThresholds(t *testing.T) {
	t.Parallel()
	node := nodeCgroup(t, 256<<20, 0)
	// evictionHard {} is none at all (without it: the kubelet's defaults).
	d := pressureDaemon(t, node, "evictionPressureTransitionPeriod: 600s\nevictionHard: {}\n")
	sock, path := newNotifySocket(t)
	d.Env = append(d.Env, "NOTIFY_SOCKET="+path)
	b, err := os.ReadFile(d.Config)
	if err != nil {
		t.Fatal(err)
	}
	base := string(b)
	d.Start()
	sock.next(t, "READY=1", 60*time.Second)
	state := filepath.Join(d.Dir, "hog")
	os.MkdirAll(state, 0o755)
	// 120 MiB and hold.
	d.WriteManifest("hog.yaml", podWithDir("hog", state, hogScript(12), "terminationGracePeriodSeconds: 30"))
	waitContent(d, filepath.Join(state, "state"), "full\n", 60*time.Second)
	if mp := condition(d, v1.NodeMemoryPressure); mp.Status != v1.ConditionFalse {
		t.Fatalf("MemoryPressure %+v without thresholds", mp)
	}

	reloadConfig(t, d, sock, base, "evictionHard: {memory.available: 180Mi}")
	hog := waitEvicted(d, "hog", 60*time.Second)
	if !strings.HasPrefix(hog.Status.Message, "The node was low on resource: memory. Threshold quantity: 180Mi") {
		t.Errorf("evicted with message %q, want the reloaded threshold's", hog.Status.Message)
	}

	// No thresholds: nothing would ever let the evicted pod back, so it
	// starts again now, not after the 600s transition period.
	reloadConfig(t, d, sock, base, "evictionHard: {}")
	d.Eventually(60*time.Second, "the evicted pod runs again", func() error {
		p := d.Pod("hog")
		if p == nil || p.Status.Phase != v1.PodRunning {
			return fmt.Errorf("pod %+v", p)
		}
		return nil
	})
	waitContent(d, filepath.Join(state, "state"), "calm\n", 60*time.Second)
}
