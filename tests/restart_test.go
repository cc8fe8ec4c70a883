package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

const restartedAt = "kubectl.kubernetes.io/restartedAt"

// restartable is a pod that counts its starts in /s/starts, writes what
// stopped it to /s/stop and runs a preStop hook that writes /s/prestop.
func restartable(name, dir string) string {
	return podWithDir(name, dir, "echo start >> /s/starts; "+forever("stop", "TERM"),
		"terminationGracePeriodSeconds: 10") + `    lifecycle:
      preStop:
        exec: {command: ["sh", "-c", "echo prestop >> /s/prestop"]}
`
}

// waitGeneration waits until pod name runs a generation other than old and
// returns it.
func waitGeneration(d *daemon, name string, old types.UID) *v1.Pod {
	d.T.Helper()
	var p *v1.Pod
	d.Eventually(60*time.Second, "a new generation of "+name, func() error {
		if p = d.Pod(name); p == nil || p.UID == old {
			return errors.New("still the old generation")
		}
		if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			return fmt.Errorf("not running: %+v", p.Status.ContainerStatuses)
		}
		return nil
	})
	return p
}

// staticpodd restart is kubectl rollout restart for a static pod: a new UID,
// new containers, the old ones stopped gracefully (preStop, stop signal), the
// annotation restartedAt saying why. A daemon that restarts, even killed,
// keeps that generation; a manifest removed and written back is the pod it
// always was.
func TestRestartVerb(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := hostDir(t, d, "s")
	d.WriteManifest("r.yaml", restartable("r", dir))
	d.Start()
	first := d.WaitRunning("r", 60*time.Second)
	waitTrapped(d, first, "main")
	oldID := first.Status.ContainerStatuses[0].ContainerID

	if out := d.CLI("restart", "r"); out != "pod/r-"+d.Name+" restarted\n" {
		t.Errorf("restart printed %q", out)
	}
	second := waitGeneration(d, "r", first.UID)
	if second.Status.ContainerStatuses[0].ContainerID == oldID {
		t.Errorf("the new generation has the old container %s", oldID)
	}
	at := second.Annotations[restartedAt]
	if _, err := time.Parse(time.RFC3339Nano, at); err != nil {
		t.Errorf("annotation %s = %q: %v", restartedAt, at, err)
	}
	if h := second.Annotations["kubernetes.io/config.hash"]; h != string(second.UID) {
		t.Errorf("config.hash %q, UID %q", h, second.UID)
	}
	if got := readFile(filepath.Join(dir, "stop")); got != "term\n" {
		t.Errorf("the old container got %q, want a graceful stop (term)", got)
	}
	if got := readFile(filepath.Join(dir, "prestop")); got != "prestop\n" {
		t.Errorf("preStop ran %q, want once", got)
	}
	waitFile(d, filepath.Join(dir, "starts"), "start\nstart\n", 30*time.Second)

	// Killed and started again, the daemon adopts the restarted generation.
	d.Kill9()
	d.Start()
	d.Eventually(30*time.Second, "the restarted generation adopted", func() error {
		p := d.Pod("r")
		if p == nil || len(p.Status.ContainerStatuses) == 0 || !p.Status.ContainerStatuses[0].Ready {
			return errors.New("not listed ready yet")
		}
		if p.UID != second.UID || p.Annotations[restartedAt] != at {
			t.Fatalf("after a daemon restart: UID %s restartedAt %q, want %s %q", p.UID, p.Annotations[restartedAt], second.UID, at)
		}
		return nil
	})
	if got := readFile(filepath.Join(dir, "starts")); got != "start\nstart\n" {
		t.Errorf("starts %q after the daemon's restart, want 2", got)
	}

	// Names the daemon does not run are errors, and so is no daemon.
	if out, err := d.CLIErr("restart", "nosuch"); err == nil || !strings.Contains(out, `no pod "nosuch"`) {
		t.Errorf("restart nosuch: %v %q", err, out)
	}

	// Removed and written back: the marker is forgotten, the pod has its
	// manifest's UID again.
	d.RemoveManifest("r.yaml")
	d.Eventually(60*time.Second, "the pod gone", func() error {
		if d.Pod("r") != nil {
			return errStill
		}
		return nil
	})
	var marks map[string]string
	if b, err := os.ReadFile(filepath.Join(d.RootDir, "restarts.json")); err != nil || json.Unmarshal(b, &marks) != nil || len(marks) != 0 {
		t.Errorf("restart markers after the removal: %s (%v)", b, err)
	}
	d.WriteManifest("r.yaml", restartable("r", dir))
	if p := d.WaitRunning("r", 60*time.Second); p.UID != first.UID || p.Annotations[restartedAt] != "" {
		t.Errorf("written back: UID %s restartedAt %q, want the first %s, none", p.UID, p.Annotations[restartedAt], first.UID)
	}

	d.Stop()
	if out, err := d.CLIErr("restart", "r"); err == nil || !strings.Contains(out, "staticpodd is not running") {
		t.Errorf("restart without a daemon: %v %q", err, out)
	}
}

// staticpodd.io/restart-on-change: an edit of a listed host file is a new
// generation of the pod, made once however the editor writes the file (here
// by renaming it away and writing it back); a file listed with =SIGHUP is
// sent to the containers instead, with no restart. A daemon that restarts
// reads the same contents, and keeps the pod.
func TestRestartOnChange(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := hostDir(t, d, "s")
	etc := hostDir(t, d, "etc")
	conf, hup := filepath.Join(etc, "x.conf"), filepath.Join(etc, "hup.conf")
	writeHostFile := func(path, data string) {
		t.Helper()
		if err := os.WriteFile(path+".tmp", []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	writeHostFile(conf, "v1")
	writeHostFile(hup, "h1")
	manifest := strings.Replace(podWithDir("w", dir, "trap 'echo got HUP' HUP; echo start >> /s/starts; "+forever("stop", "TERM"),
		"terminationGracePeriodSeconds: 10"), "metadata: {name: w}",
		fmt.Sprintf("metadata:\n  name: w\n  annotations: {staticpodd.io/restart-on-change: '%s, %s=SIGHUP'}", conf, hup), 1)
	d.WriteManifest("w.yaml", manifest)
	d.Start()
	first := d.WaitRunning("w", 60*time.Second)
	waitTrapped(d, first, "main")
	waitCatches(d, first, "main", syscall.SIGHUP)

	writeHostFile(hup, "h2")
	d.Eventually(30*time.Second, "the container told of HUP", func() error {
		if out := d.CLI("logs", "w"); !strings.Contains(out, "got HUP") {
			return fmt.Errorf("logs %q", out)
		}
		return nil
	})
	if p := d.Pod("w"); p.UID != first.UID || p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("signalled: UID %s, restarts %d; want %s, 0", p.UID, p.Status.ContainerStatuses[0].RestartCount, first.UID)
	}

	// An editor's save: the file renamed away, the new one written.
	if err := os.Rename(conf, conf+"~"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(conf, []byte("v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	second := waitGeneration(d, "w", first.UID)
	if got := readFile(filepath.Join(dir, "stop")); got != "term\n" {
		t.Errorf("the old container got %q, want a graceful stop (term)", got)
	}
	waitFile(d, filepath.Join(dir, "starts"), "start\nstart\n", 30*time.Second)

	d.Kill9()
	d.Start()
	d.Eventually(30*time.Second, "the pod adopted", func() error {
		p := d.Pod("w")
		if p == nil || len(p.Status.ContainerStatuses) == 0 || !p.Status.ContainerStatuses[0].Ready {
			return errors.New("not listed ready yet")
		}
		if p.UID != second.UID {
			t.Fatalf("after a daemon restart: UID %s, want %s", p.UID, second.UID)
		}
		return nil
	})
	if got := readFile(filepath.Join(dir, "starts")); got != "start\nstart\n" {
		t.Errorf("starts %q, want 2: one per content of %s", got, conf)
	}
}

// A restarted pod whose manifest is invalid when the daemon starts runs on,
// from the manifest kept with it, as the same generation.
func TestRestartedLastGoodAtStart(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := hostDir(t, d, "s")
	body := restartable("g", dir)
	d.WriteManifest("g.yaml", body)
	d.Start()
	first := d.WaitRunning("g", 60*time.Second)
	waitTrapped(d, first, "main")
	d.CLI("restart", "g")
	second := waitGeneration(d, "g", first.UID)
	d.Eventually(10*time.Second, "the manifest kept with the new generation", func() error {
		_, err := os.Stat(filepath.Join(d.RootDir, "pods", string(second.UID), "manifest.json"))
		return err
	})
	d.Kill9()
	d.WriteManifest("g.yaml", strings.Replace(body, "terminationGracePeriodSeconds: 10", "terminationGracePeriodSeconds: 10\n  restartPolicy: Sometimes", 1))
	old := time.Now().Add(-time.Hour) // not a file being written
	os.Chtimes(filepath.Join(d.Manifests, "g.yaml"), old, old)
	d.Start()
	d.Eventually(30*time.Second, "the problem shown", func() error {
		if out, _ := d.CLIErr("ps"); !strings.Contains(out, `Unsupported value: "Sometimes"`) {
			return fmt.Errorf("ps:\n%s", out)
		}
		return nil
	})
	d.Eventually(30*time.Second, "the restarted generation running on", func() error {
		p := d.Pod("g")
		if p == nil || len(p.Status.ContainerStatuses) == 0 || !p.Status.ContainerStatuses[0].Ready {
			return errors.New("not listed ready yet")
		}
		if p.UID != second.UID || p.Annotations[restartedAt] != second.Annotations[restartedAt] {
			t.Fatalf("UID %s restartedAt %q, want %s %q", p.UID, p.Annotations[restartedAt], second.UID, second.Annotations[restartedAt])
		}
		if _, ok := p.Annotations["staticpodd.io/manifest-uid"]; ok {
			t.Errorf("/pods shows the agent's own annotation: %v", p.Annotations)
		}
		return nil
	})
	if got := readFile(filepath.Join(dir, "starts")); got != "start\nstart\n" {
		t.Errorf("starts %q, want 2", got)
	}
}

// TestRestartOnChangeBacksOff: a container that writes the file it is
// restarted on, at each start, restarts with the crash loop's back-off
// (10s, then 20s...), not as fast as it starts.
func TestRestartOnChangeBacksOff(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := hostDir(t, d, "s")
	conf := filepath.Join(dir, "x.conf")
	if err := os.WriteFile(conf, []byte("0"), 0o666); err != nil {
		t.Fatal(err)
	}
	manifest := strings.Replace(podWithDir("w", dir, "cut -d' ' -f1 /proc/uptime >> /s/starts; cat /proc/uptime > /s/x.conf; "+forever("stop", "TERM"), ""),
		"metadata: {name: w}", fmt.Sprintf("metadata:\n  name: w\n  annotations: {staticpodd.io/restart-on-change: '%s'}", conf), 1)
	d.WriteManifest("w.yaml", manifest)
	d.Start()
	var starts []float64
	d.Eventually(2*time.Minute, "three starts", func() error {
		starts = starts[:0]
		for _, f := range strings.Fields(readFile(filepath.Join(dir, "starts"))) {
			v, err := strconv.ParseFloat(f, 64)
			if err != nil {
				return err
			}
			starts = append(starts, v)
		}
		if len(starts) < 3 {
			return fmt.Errorf("%d starts", len(starts))
		}
		return nil
	})
	// The first change applies at once; the next waits out the back-off.
	if gap := starts[2] - starts[1]; gap < 9 {
		t.Errorf("starts at %v: the third came %.1fs after the second, want the 10s back-off", starts, gap)
	}
	t.Logf("starts at %v (host uptime)", starts)
}
