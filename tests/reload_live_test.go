package tests

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/agent/config"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// liveCase proves that a reload changing field (a key of agent/config's
// table) changes what the daemon does: run reloads it, then waits for
// behaviour that the old value would not give.
type liveCase struct {
	field string
	run   func(t *testing.T)
}

// liveGroup is the cases of one reload group, in order, on one daemon that
// setup starts; a case may rely on the state the ones before it left.
type liveGroup struct {
	group config.Reload
	setup func(t *testing.T)
	cases []liveCase
}

// liveDaemon is a daemon with a notify socket, and the configuration a
// reload writes.
type liveDaemon struct {
	*daemon
	sock   *notifySocket
	config string
}

func newLiveDaemon(d *daemon, extra string) *liveDaemon {
	sock, path := newNotifySocket(d.T)
	d.Env = append(d.Env, "NOTIFY_SOCKET="+path)
	b, err := os.ReadFile(d.Config)
	if err != nil {
		d.T.Fatal(err)
	}
	ld := &liveDaemon{daemon: d, sock: sock, config: withLines(string(b), strings.Split(strings.TrimSpace(extra), "\n")...)}
	if err := os.WriteFile(d.Config, []byte(ld.config), 0o644); err != nil {
		d.T.Fatal(err)
	}
	return ld
}

func (ld *liveDaemon) start() {
	ld.Start()
	ld.sock.next(ld.T, "READY=1", 60*time.Second)
}

// reload sets the lines of set in the configuration and reloads it; the
// daemon must say that it applied all of it.
func (ld *liveDaemon) reload(t *testing.T, set ...string) {
	t.Helper()
	ld.config = withLines(ld.config, set...)
	if msg := reloadConfig(t, ld.daemon, ld.sock, ld.config); strings.Contains(msg, "not reloaded") || strings.Contains(msg, "restart to apply") {
		t.Fatalf("reload of %q: STATUS= %q", set, msg)
	}
}

// Every field that agent/config's table marks live changes what the daemon
// does when a reload (SIGHUP) changes it: a case per field, each waiting for
// behaviour that only the new value gives. A live field without a case
// fails the test, so a field cannot be made live without proving it.
func TestReloadEveryLiveField(t *testing.T) {
	t.Parallel()
	groups := []liveGroup{liveSources(), liveEviction(), liveLogs(), liveImageGC()}
	for _, g := range groups {
		var have []string
		for _, c := range g.cases {
			have = append(have, c.field)
			if got := config.ReloadOf(c.field); got != g.group {
				t.Errorf("case %s is in group %v; the table says %v", c.field, g.group, got)
			}
		}
		for _, f := range config.LiveFields(g.group) {
			if !slices.Contains(have, f) {
				t.Errorf("live field %s (%v) has no case: add one that proves a reload changes what the daemon does", f, g.group)
			}
		}
	}
	if t.Failed() {
		return
	}
	for _, g := range groups {
		t.Run(g.group.String(), func(t *testing.T) {
			t.Parallel()
			g.setup(t)
			for _, c := range g.cases {
				if !t.Run(c.field, c.run) {
					return // the next cases build on this one
				}
			}
		})
	}
}

// liveSources: the file source's directory and period, the URL source's
// URL, header and period.
func liveSources() liveGroup {
	var ld *liveDaemon
	var srv *manifestServer
	var dir2, outside string
	return liveGroup{group: config.ReloadSources,
		setup: func(t *testing.T) {
			srv = newManifestServer(t, sleeperList("1", "u"))
			srv.RequireHeader("Authorization", "Bearer one")
			ld = newLiveDaemon(newDaemon(t), "fileCheckFrequency: 1h\nhttpCheckFrequency: 1h\nstaticPodURLHeader: {Authorization: [\"Bearer one\"]}")
			dir2, outside = filepath.Join(ld.Dir, "manifests2"), filepath.Join(ld.Dir, "outside")
			for _, dir := range []string{dir2, outside} {
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			ld.WriteManifest("a.yaml", sleeper("a", ""))
			ld.start()
			ld.WaitRunning("a", 60*time.Second)
			// Back to the first directory and no URL: the daemon's cleanup
			// removes the pods of that directory only.
			t.Cleanup(func() {
				if ld.Running() {
					reloadConfig(t, ld.daemon, ld.sock, withLines(ld.config, "staticPodPath: "+ld.Manifests, "staticPodURL: "))
				}
			})
		},
		cases: []liveCase{
			{"staticPodPath", func(t *testing.T) {
				if err := os.WriteFile(filepath.Join(dir2, "b.yaml"), []byte(sleeper("b", "")), 0o644); err != nil {
					t.Fatal(err)
				}
				ld.reload(t, "staticPodPath: "+dir2)
				ld.WaitRunning("b", 60*time.Second)
			}},
			{"staticPodURL", func(t *testing.T) {
				ld.reload(t, "staticPodURL: "+srv.URL())
				ld.WaitRunning("u", 60*time.Second)
			}},
			// Polled every hour, the URL is asked once, when its source starts.
			{"httpCheckFrequency", func(t *testing.T) {
				ld.reload(t, "httpCheckFrequency: 1s")
				served := srv.Served()
				ld.Eventually(20*time.Second, "three polls a second apart", func() error {
					if n := srv.Served() - served; n < 3 {
						return fmt.Errorf("%d polls answered", n)
					}
					return nil
				})
			}},
			// The server wants another token: only the new header gets an
			// answer.
			{"staticPodURLHeader", func(t *testing.T) {
				srv.RequireHeader("Authorization", "Bearer two")
				served := srv.Served()
				ld.reload(t, `staticPodURLHeader: {Authorization: ["Bearer two"]}`)
				ld.Eventually(20*time.Second, "a poll answered with the new header", func() error {
					if srv.Served() == served {
						return errors.New("no poll answered")
					}
					return nil
				})
			}},
			// A manifest changed through a hard link from another directory
			// raises no inotify event in the watched one: only a relist, every
			// fileCheckFrequency, sees it. The reload's own relist comes before
			// the change.
			{"fileCheckFrequency", func(t *testing.T) {
				src, link := filepath.Join(outside, "f.yaml"), filepath.Join(dir2, "f.yaml")
				if err := os.WriteFile(src, []byte(sleeper("f", "")), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Link(src, link); err != nil {
					t.Fatal(err)
				}
				uid, _ := runningPod(t, ld.daemon, "f")
				noEventThroughLink(t, src, dir2)
				ld.reload(t, "fileCheckFrequency: 1s")
				writeInPlace(t, src, sleeper("f", "    env: [{name: V, value: \"2\"}]\n"))
				ld.Eventually(30*time.Second, "pod f changed by a relist", func() error {
					p := ld.Pod("f")
					if p == nil {
						return errors.New("no pod f")
					}
					if string(p.UID) == uid || p.Status.Phase != v1.PodRunning {
						return fmt.Errorf("pod f: UID %s (was %s), phase %s", p.UID, uid, p.Status.Phase)
					}
					return nil
				})
			}},
		},
	}
}

// writeInPlace writes content into the file at path, keeping its inode.
func writeInPlace(t *testing.T, path, content string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// noEventThroughLink fails the test unless a write through path, a hard link
// outside dir, goes unseen by an inotify watch of dir: the first event the
// watch gives is that of a file created in dir after the write.
func noEventThroughLink(t *testing.T, path, dir string) {
	t.Helper()
	w, err := fsnotify.NewWatcher()
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	writeInPlace(t, path, string(b))
	marker := filepath.Join(dir, ".marker") // a dot-file: the file source skips it
	if err := os.WriteFile(marker, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	defer os.Remove(marker)
	select {
	case ev := <-w.Events:
		if ev.Name != marker {
			t.Fatalf("a write through a hard link outside %s raised %v in it", dir, ev)
		}
	case err := <-w.Errors:
		t.Fatal(err)
	case <-time.After(10 * time.Second):
		t.Fatal("no inotify event for the marker")
	}
}

// liveEviction: on a node of 256 MiB (a cgroup's limit) with no pod using
// much, a threshold above 256Mi is met, one of 1Mi never.
func liveEviction() liveGroup {
	var ld *liveDaemon
	var node string
	pressure := func(t *testing.T, want v1.ConditionStatus) {
		t.Helper()
		ld.Eventually(60*time.Second, "MemoryPressure "+string(want), func() error {
			if mp := condition(ld.daemon, v1.NodeMemoryPressure); mp.Status != want {
				return fmt.Errorf("MemoryPressure %s", mp.Status)
			}
			return nil
		})
	}
	return liveGroup{group: config.ReloadEviction,
		setup: func(t *testing.T) {
			node = nodeCgroup(t, 256<<20, 0)
			ld = newLiveDaemon(pressureDaemon(t, node, ""), "evictionHard: {}\nevictionPressureTransitionPeriod: 600s\nevictionSoftGracePeriod: {memory.available: 1h}")
			ld.start()
			pressure(t, v1.ConditionFalse)
		},
		cases: []liveCase{
			{"evictionHard", func(t *testing.T) {
				ld.reload(t, "evictionHard: {memory.available: 1Gi}")
				pressure(t, v1.ConditionTrue)
			}},
			// No threshold is met any more; the condition would stay for 600s.
			{"evictionPressureTransitionPeriod", func(t *testing.T) {
				ld.reload(t, "evictionHard: {memory.available: 1Mi}")
				ld.reload(t, "evictionPressureTransitionPeriod: 1s")
				pressure(t, v1.ConditionFalse)
			}},
			// A threshold met once stays met until its minimum reclaim is
			// available too: 100Mi + 1Gi never is, on the node given back its
			// 256 MiB.
			{"evictionMinimumReclaim", func(t *testing.T) {
				ld.reload(t, "evictionHard: {memory.available: 100Mi}", "evictionMinimumReclaim: {memory.available: 1Gi}")
				setNodeMemory(t, node, 90<<20)
				pressure(t, v1.ConditionTrue)
				setNodeMemory(t, node, 256<<20)
				ld.reload(t, "evictionMinimumReclaim: {memory.available: 1Mi}")
				pressure(t, v1.ConditionFalse)
			}},
			{"evictionSoft", func(t *testing.T) {
				ld.WriteManifest("p.yaml", evictable("p", "BestEffort"))
				ld.WaitRunning("p", 60*time.Second)
				ld.reload(t, "evictionSoft: {memory.available: 1Gi}")
				pressure(t, v1.ConditionTrue)
			}},
			// The soft threshold is met but p stays for the hour of grace.
			{"evictionSoftGracePeriod", func(t *testing.T) {
				ld.reload(t, "evictionSoftGracePeriod: {memory.available: 1s}")
				waitEvicted(ld.daemon, "p", 60*time.Second)
			}},
			// The next pod evicted by the soft threshold gets 4s, not its own 30s.
			{"evictionMaxPodGracePeriod", func(t *testing.T) {
				ld.reload(t, "evictionMaxPodGracePeriod: 4")
				ld.WriteManifest("q.yaml", evictable("q", "Burstable")) // admitted under MemoryPressure
				waitEvicted(ld.daemon, "q", 60*time.Second)
				evicted := regexp.MustCompile(`evicting pod" pod=\S*q\S* .*grace=4s`)
				ld.WaitOutput(10*time.Second, "q evicted with grace=4s", evicted.MatchString)
			}},
		},
	}
}

// evictable is a pod that takes 30s to stop, BestEffort or Burstable.
func evictable(name, qos string) string {
	res := ""
	if qos == "Burstable" {
		res = "    resources: {requests: {memory: 8Mi}}\n"
	}
	return strings.Replace(sleeper(name, res), "terminationGracePeriodSeconds: 3", "terminationGracePeriodSeconds: 30", 1)
}

// setNodeMemory sets the memory limit of the cgroup nodeCgroup made.
func setNodeMemory(t *testing.T, node string, n int64) {
	t.Helper()
	file := filepath.Join("/sys/fs/cgroup/memory", node, "memory.limit_in_bytes")
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err == nil {
		file = filepath.Join("/sys/fs/cgroup", node, "memory.max")
	}
	if err := os.WriteFile(file, []byte(strconv.FormatInt(n, 10)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// liveLogs: a container writing about 5 KB/s, with rotation off at start.
func liveLogs() liveGroup {
	var ld *liveDaemon
	var logDir string
	logFiles := func() []string {
		ents, _ := os.ReadDir(logDir)
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		return out
	}
	return liveGroup{group: config.ReloadLogs,
		setup: func(t *testing.T) {
			ld = newLiveDaemon(newDaemon(t), "containerLogMaxSize: \"-1\"\ncontainerLogMaxFiles: 5")
			ld.WriteManifest("chatty.yaml", sleeper("chatty", "")[:strings.Index(sleeper("chatty", ""), "    command:")]+
				"    command: [\"sh\", \"-c\", \"trap 'exit 0' TERM; while true; do seq 1 200; sleep 0.2 & wait $!; done\"]\n")
			ld.start()
			uid, _ := runningPod(t, ld.daemon, "chatty")
			logDir = filepath.Join(ld.LogsDir, "default_chatty-"+ld.Name+"_"+uid, "main")
		},
		cases: []liveCase{
			{"containerLogMaxSize", func(t *testing.T) {
				ld.reload(t, "containerLogMaxSize: 8Ki")
				ld.Eventually(30*time.Second, "five log files", func() error {
					if fs := logFiles(); len(fs) != 5 {
						return fmt.Errorf("log files %v", fs)
					}
					return nil
				})
			}},
			{"containerLogMaxFiles", func(t *testing.T) {
				ld.reload(t, "containerLogMaxFiles: 2")
				ld.Eventually(30*time.Second, "two log files", func() error {
					if fs := logFiles(); len(fs) != 2 {
						return fmt.Errorf("log files %v", fs)
					}
					return nil
				})
			}},
		},
	}
}

// liveImageGC: a filesystem of 256 MiB holding the image store, three
// unused images and a pinned one, kept at a chosen usage by a fill file.
// Collection runs after every reload.
func liveImageGC() liveGroup {
	var ld *liveDaemon
	var mnt string
	junk := []string{"example.com/j1:v1", "example.com/j2:v1", "example.com/j3:v1", "example.com/pinned:v1"}
	// usage sets the filesystem's usage to pct percent with the fill file.
	usage := func(t *testing.T, pct int64) {
		t.Helper()
		path := filepath.Join(mnt, "fill")
		os.Remove(path)
		size := statfsSize(t, mnt)
		n := size*pct/100 - (size - available(t, mnt))
		if n < 0 {
			t.Fatalf("usage is above %d%% without the fill file", pct)
		}
		fill(t, path, n)
	}
	failed := func() []string {
		var msgs []string
		for _, e := range events(ld.daemon) {
			if e.Reason == "FreeDiskSpaceFailed" {
				msgs = append(msgs, e.Message)
			}
		}
		return msgs
	}
	return liveGroup{group: config.ReloadImageGC,
		setup: func(t *testing.T) {
			mnt = filepath.Join(t.TempDir(), "disk")
			testroot.LoopFS(t, mnt, 256<<20)
			d := newDaemon(t)
			d.RootDir = filepath.Join(mnt, "root")
			ld = newLiveDaemon(d, "imageGCHighThresholdPercent: 100\nimageGCLowThresholdPercent: 50\nimageMinimumGCAge: 1h\nimageMaximumGCAge: 0s")
			ld.CLI("images", "import", testdaemon.Image)
			for _, ref := range junk {
				p := filepath.Join(ld.Dir, strings.NewReplacer("/", "_", ":", "_").Replace(ref)+".tar")
				buildImage(t, p, "-ref", ref, "-pad", strconv.Itoa(8<<20))
				ld.CLI("images", "import", p)
			}
			ld.CLI("images", "pin", "example.com/pinned:v1")
			ld.WriteManifest("user.yaml", sleeper("user", "")) // busybox is in use
			ld.start()
			ld.WaitRunning("user", 60*time.Second)
			usage(t, 70)
		},
		cases: []liveCase{
			// Every image is younger than imageMinimumGCAge: the collector,
			// now on, frees nothing and says so.
			{"imageGCHighThresholdPercent", func(t *testing.T) {
				ld.reload(t, "imageGCHighThresholdPercent: 60")
				ld.Eventually(30*time.Second, "FreeDiskSpaceFailed", func() error {
					if len(failed()) == 0 {
						return errors.New("no event")
					}
					return nil
				})
			}},
			// What it wants to free grows from 20% to 40% of the filesystem.
			{"imageGCLowThresholdPercent", func(t *testing.T) {
				before := failed()
				ld.reload(t, "imageGCLowThresholdPercent: 30")
				want := regexp.MustCompile(`of the ([0-9.]+)MiB wanted`)
				ld.Eventually(30*time.Second, "FreeDiskSpaceFailed wanting 40%", func() error {
					for _, m := range failed() {
						if w := want.FindStringSubmatch(m); w != nil && !slices.Contains(before, m) {
							if mib, _ := strconv.ParseFloat(w[1], 64); mib > 256*0.35 {
								return nil
							}
						}
					}
					return fmt.Errorf("events %q", failed())
				})
			}},
			{"imageMinimumGCAge", func(t *testing.T) {
				ld.reload(t, "imageMinimumGCAge: 1s")
				// The images may be younger than 1s at the reload's pass:
				// each reload (the same configuration) asks for another.
				ld.Eventually(30*time.Second, "the unpinned unused images collected", func() error {
					for _, ref := range junk[:3] {
						if hasImage(ld.daemon, ref) {
							reloadConfig(t, ld.daemon, ld.sock, ld.config)
							return fmt.Errorf("%s still there", ref)
						}
					}
					return nil
				})
				if !hasImage(ld.daemon, "example.com/pinned:v1") {
					t.Fatal("the pinned image was collected")
				}
			}},
			// Below the high threshold, only the maximum age removes an image.
			{"imageMaximumGCAge", func(t *testing.T) {
				usage(t, 30)
				ld.CLI("images", "unpin", "example.com/pinned:v1")
				ld.reload(t, "imageMaximumGCAge: 3s")
				// Unused for less than 3s at the reload's pass: each reload
				// (the same configuration) asks for another.
				ld.Eventually(30*time.Second, "the image unused for 3s collected", func() error {
					if hasImage(ld.daemon, "example.com/pinned:v1") {
						reloadConfig(t, ld.daemon, ld.sock, ld.config)
						return errStill
					}
					return nil
				})
			}},
		},
	}
}
