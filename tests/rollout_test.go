package tests

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// webManifest is pod web, rolled back when a generation is not Ready
// within rollbackAfter, running cmd, with the host directory flags at
// /flags: a test makes a generation fail by creating /flags/fail.
func webManifest(flags, rollbackAfter, cmd string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: web
  annotations:
    staticpodd.io/rollback-after: %q
spec:
  terminationGracePeriodSeconds: 1
  volumes:
  - name: flags
    hostPath: {path: %s}
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", %q]
    volumeMounts:
    - {name: flags, mountPath: /flags}
`, rollbackAfter, flags, cmd)
}

// failsOnFlag runs until stopped, unless /flags/fail exists when it starts.
const failsOnFlag = "test -e /flags/fail && exit 1; trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"

// livePods are the generations of pod name listed and not terminating.
func livePods(d *testdaemon.Daemon, name string) []v1.Pod {
	var out []v1.Pod
	for _, p := range d.Pods() {
		if p.Name == name+"-"+d.Name && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out
}

// awaitGeneration waits until uid is the one generation of web listed live.
func awaitGeneration(d *testdaemon.Daemon, uid string, timeout time.Duration) {
	d.T.Helper()
	d.Eventually(timeout, "generation "+uid+" of web", func() error {
		if live := livePods(d, "web"); len(live) != 1 || string(live[0].UID) != uid {
			var got []string
			for _, p := range live {
				got = append(got, string(p.UID)+" "+string(p.Status.Phase))
			}
			return fmt.Errorf("live generations: %v", got)
		}
		return nil
	})
}

// awaitEdit waits until a generation other than those in old runs, and
// returns its UID.
func awaitEdit(d *testdaemon.Daemon, old ...string) string {
	d.T.Helper()
	var uid string
	d.Eventually(30*time.Second, "the edit runs", func() error {
		live := livePods(d, "web")
		if len(live) != 1 {
			return fmt.Errorf("%d live generations", len(live))
		}
		for _, o := range old {
			if string(live[0].UID) == o {
				return errStill
			}
		}
		uid = string(live[0].UID)
		return nil
	})
	return uid
}

// removeWeb removes pod web and checks that nothing of any of its
// generations is left.
func removeWeb(d *testdaemon.Daemon) {
	d.T.Helper()
	d.RemoveManifest("web.yaml")
	d.Eventually(30*time.Second, "web removed", func() error {
		if len(d.Pods()) > 0 {
			return errStill
		}
		return nil
	})
	d.Stop()
	d.AssertNoLeaks()
}

func healthzVerbose(t *testing.T, d *testdaemon.Daemon) string {
	t.Helper()
	resp, err := d.Client().Get(d.URL("/healthz?verbose"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Errorf("/healthz?verbose: %d\n%s", resp.StatusCode, b)
	}
	return string(b)
}

// A pod whose edit never becomes Ready is rolled back to the generation
// that was Ready within its rollback-after; ps, events, describe, healthz
// and rollout say so, the file is flagged until it changes again, across a
// daemon restart; the generation rolled back to failing too is left
// running (no loop).
func TestRollbackOnNotReady(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	flags := filepath.Join(d.Dir, "flags")
	if err := os.Mkdir(flags, 0o755); err != nil {
		t.Fatal(err)
	}
	d.Start()
	d.WriteManifest("web.yaml", webManifest(flags, "8s", failsOnFlag))
	good := string(d.WaitRunning("web", 30*time.Second).UID)
	d.Eventually(20*time.Second, "the first generation passes its rollout", func() error {
		if out := d.CLI("rollout", "status", "web"); !strings.HasPrefix(out, "ready:") {
			return fmt.Errorf("rollout status: %s", out)
		}
		return nil
	})

	d.WriteManifest("web.yaml", webManifest(flags, "8s", "echo broken; exit 3"))
	bad := awaitEdit(d, good)
	started := time.Now()
	// Once back, the old generation fails too.
	if err := os.WriteFile(filepath.Join(flags, "fail"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	awaitGeneration(d, good, 30*time.Second)
	if took := time.Since(started); took > 20*time.Second {
		t.Errorf("rolled back %s after the edit ran; rollback-after is 8s", took)
	}
	out, err := d.CLIErr("rollout", "status", "web")
	if err == nil || !strings.Contains(out, "rolled back") || !strings.Contains(out, bad) {
		t.Errorf("rollout status after a rollback: %v\n%s", err, out)
	}
	if ps := d.CLI("ps"); !strings.Contains(ps, "web.yaml") || !strings.Contains(ps, "rolled back (deadline) to generation "+good) {
		t.Errorf("ps does not flag web.yaml:\n%s", ps)
	}
	if describe := d.CLI("describe", "web"); !strings.Contains(describe, "RolledBack") || !strings.Contains(describe, "exit code 3") {
		t.Errorf("describe of the generation rolled back to does not show why:\n%s", describe)
	}
	if h := healthzVerbose(t, d); !strings.Contains(h, "[-]rollouts failed") || !strings.Contains(h, "web-"+d.Name) {
		t.Errorf("/healthz?verbose does not name the rollback:\n%s", h)
	}

	// The generation rolled back to fails its own deadline: left running.
	d.Eventually(30*time.Second, "the rollback's failure is told", func() error {
		if ev := d.CLI("events"); !strings.Contains(ev, "never loops") {
			return fmt.Errorf("events:\n%s", ev)
		}
		return nil
	})
	awaitGeneration(d, good, time.Second)
	history := d.CLI("rollout", "history", "web")
	for _, want := range []string{good, bad, "rolled back (deadline)", "rollback of " + bad, "container main ran ", "exit code 3", "exit code 1"} {
		if !strings.Contains(history, want) {
			t.Errorf("rollout history lacks %q:\n%s", want, history)
		}
	}

	// A daemon restart changes nothing: still flagged, nothing loops.
	d.Stop()
	if out, err := d.CLIErr("rollout", "status", "web"); err == nil || !strings.Contains(out, "rolled back") {
		t.Errorf("rollout status with the daemon down: %v\n%s", err, out)
	}
	d.Start()
	awaitGeneration(d, good, 30*time.Second)
	if ps := d.CLI("ps"); !strings.Contains(ps, "rolled back (deadline)") {
		t.Errorf("after a restart ps does not flag web.yaml:\n%s", ps)
	}

	// An edit lifts the flag; the new content runs.
	if err := os.Remove(filepath.Join(flags, "fail")); err != nil {
		t.Fatal(err)
	}
	d.WriteManifest("web.yaml", webManifest(flags, "8s", failsOnFlag+" # v3"))
	awaitEdit(d, good, bad)
	d.Eventually(20*time.Second, "the flag lifted", func() error {
		if ps := d.CLI("ps"); strings.Contains(ps, "rolled back") {
			return fmt.Errorf("ps:\n%s", ps)
		}
		return nil
	})
	removeWeb(d)
}

// A kill -9 of the daemon while a bad generation runs does not lose its
// deadline, timed from its start on disk: the rollback happens after the
// restart, and the two generations never run together.
func TestRollbackAcrossKill9(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	flags := filepath.Join(d.Dir, "flags")
	if err := os.Mkdir(flags, 0o755); err != nil {
		t.Fatal(err)
	}
	d.Start()
	d.WriteManifest("web.yaml", webManifest(flags, "10s", failsOnFlag))
	good := string(d.WaitRunning("web", 30*time.Second).UID)
	d.WriteManifest("web.yaml", webManifest(flags, "10s", "sleep 1; exit 7"))
	bad := awaitEdit(d, good)
	d.Eventually(20*time.Second, "the edit's start on disk", func() error {
		if out := d.CLI("rollout", "status", "web"); !strings.Contains(out, bad) {
			return fmt.Errorf("rollout status: %s", out)
		}
		return nil
	})
	d.Kill9()
	time.Sleep(3 * time.Second)
	d.Start()
	awaitGeneration(d, good, 30*time.Second)
	if out, err := d.CLIErr("rollout", "status", "web"); err == nil || !strings.Contains(out, bad) {
		t.Errorf("rollout status: %v\n%s", err, out)
	}
	// Never two generations: the bad one's containers are gone.
	for _, p := range d.Pods() {
		if string(p.UID) == bad && p.DeletionTimestamp == nil {
			t.Errorf("generation %s is still live", bad)
		}
	}
	removeWeb(d)
}

// rollout undo brings back the previous Ready generation until the file
// changes; history and status work with the daemon down, undo does not.
// Hostile: a huge or garbage rollback-after is a manifest problem naming
// the field, and a tampered history is reported, never fatal.
func TestRolloutUndoAndHostile(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	flags := filepath.Join(d.Dir, "flags")
	if err := os.Mkdir(flags, 0o755); err != nil {
		t.Fatal(err)
	}
	d.Start()
	// Undo, not the trial, is tested: a rollback-after no generation
	// reaches while the test runs, not one a loaded machine's start can
	// miss (5s: v2 not yet Ready was rolled back before the undo).
	const trialOff = "1h"
	d.WriteManifest("web.yaml", webManifest(flags, trialOff, failsOnFlag+" # v1"))
	v1uid := string(d.WaitRunning("web", 30*time.Second).UID)
	d.WriteManifest("web.yaml", webManifest(flags, trialOff, failsOnFlag+" # v2"))
	v2uid := awaitEdit(d, v1uid)
	d.Eventually(20*time.Second, "v2 Ready", func() error {
		if out := d.CLI("rollout", "status", "web"); !strings.Contains(out, v2uid+" Ready") {
			return fmt.Errorf("rollout status: %s", out)
		}
		return nil
	})
	if out := d.CLI("rollout", "undo", "web"); !strings.Contains(out, v1uid) {
		t.Errorf("rollout undo: %s", out)
	}
	awaitGeneration(d, v1uid, 30*time.Second)
	if ps := d.CLI("ps"); !strings.Contains(ps, "rolled back (undo)") {
		t.Errorf("ps does not flag web.yaml after undo:\n%s", ps)
	}
	// A restart would lift the rejection and run v2 again: refused.
	if out, err := d.CLIErr("restart", "web"); err == nil || !strings.Contains(out, "a restart would run generation "+v2uid+" again") {
		t.Errorf("restart of a pod rolled back: %v\n%s", err, out)
	}
	awaitGeneration(d, v1uid, time.Second)

	// Garbage values of rollback-after: refused, the running pod kept.
	for _, v := range []string{"soon", "-1s", "1ns", strings.Repeat("9", 200000) + "h"} {
		d.WriteManifest("web.yaml", webManifest(flags, v, failsOnFlag))
		d.Eventually(15*time.Second, "the bad value refused", func() error {
			ps := d.CLI("ps")
			if !strings.Contains(ps, "metadata.annotations[staticpodd.io/rollback-after]") || !strings.Contains(ps, "web.yaml") {
				return fmt.Errorf("ps:\n%s", ps)
			}
			if len(ps) > 8000 {
				return fmt.Errorf("ps of %d bytes", len(ps))
			}
			return nil
		})
		awaitGeneration(d, v1uid, time.Second)
	}

	// With the daemon down: history and status from the records; undo
	// needs the daemon.
	d.Stop()
	if out := d.CLI("rollout", "history", "web"); !strings.Contains(out, v1uid) || !strings.Contains(out, "rolled back (undo)") {
		t.Errorf("rollout history with the daemon down:\n%s", out)
	}
	if out, err := d.CLIErr("rollout", "undo", "web"); err == nil || !strings.Contains(out, "needs the daemon running") {
		t.Errorf("rollout undo with the daemon down: %v\n%s", err, out)
	}

	// A tampered history: reported, started afresh, the pod runs.
	file := filepath.Join(d.RootDir, "rollouts", "default_web-"+d.Name+".json")
	if err := os.WriteFile(file, []byte("{\"namespace\": \"default\", \"generations\": [{\"uid\": \x00"), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := d.CLI("rollout", "history", "web"); !strings.Contains(out, "damaged") {
		t.Errorf("rollout history of a tampered file does not say so:\n%s", out)
	}
	d.WriteManifest("web.yaml", webManifest(flags, trialOff, failsOnFlag+" # v3"))
	d.Start()
	v3 := awaitEdit(d, v1uid, v2uid)
	d.Eventually(15*time.Second, "the damage reported", func() error {
		if ev := d.CLI("events"); !strings.Contains(ev, "damaged") {
			return fmt.Errorf("events:\n%s", ev)
		}
		return nil
	})
	d.Eventually(15*time.Second, "the history started afresh", func() error {
		if out := d.CLI("rollout", "history", "web"); !strings.Contains(out, v3) || strings.Contains(out, "damaged") {
			return fmt.Errorf("rollout history:\n%s", out)
		}
		return nil
	})
	removeWeb(d)
}
