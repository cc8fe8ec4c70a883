package tests

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// monitorAnonBound is a generous bound on a monitor's anonymous memory once
// its container runs: the C monitor (oci/monitor) has about 150 KiB
// (docs/benchmarks.md, "Memory"); the Go monitor it replaced had 4–5 MiB.
// Crossing it means the running monitor is a Go program again, or keeps
// buffers it should not.
const monitorAnonBound = 1 << 20

// A running container's monitor is at rest below monitorAnonBound of
// anonymous memory.
func TestMonitorMemoryAtRest(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("rest.yaml", sleeper("rest", ""))
	pod := d.WaitRunning("rest", 30*time.Second)
	mon := ppid(containerPID(d, pod, "main"))
	// The monitor reports the container's start, then executes the running
	// (C) monitor: on a loaded machine the pod can show Running first.
	d.Eventually(10*time.Second, "the container's parent the running (C) monitor", func() error {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", mon))
		if err != nil || !bytes.HasPrefix(cmdline, []byte("staticpodd-monitor\x00__staticpodd_monitor_running\x00")) {
			return fmt.Errorf("parent %d of the container's init is not the running (C) monitor: %q %v", mon, cmdline, err)
		}
		return nil
	})
	// Built by make build, the binary runs its monitors as the program it
	// embeds (oci/monitor/exe) from a sealed memfd; built without the tag,
	// as itself.
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", mon))
	if embedsMonitor(t) && (err != nil || !strings.HasPrefix(exe, "/memfd:") || !strings.HasSuffix(exe, "staticpodd-monitor (deleted)")) {
		t.Errorf("monitor %d runs %q (%v), not the embedded monitor's memfd", mon, exe, err)
	}
	// ... built as the daemon was: the same Go, tags and revision (a stale
	// program embedded by hand would say otherwise).
	if embedsMonitor(t) {
		daemon, monitor := buildInfo(t, testdaemon.Bin), buildInfo(t, fmt.Sprintf("/proc/%d/exe", mon))
		daemon["-tags"] = strings.TrimSuffix(daemon["-tags"], ",embedmonitor")
		for _, k := range []string{"go", "-tags", "vcs.revision", "vcs.modified", "CGO_ENABLED"} {
			if daemon[k] != monitor[k] {
				t.Errorf("the embedded monitor was built with %s %q, the daemon with %q", k, monitor[k], daemon[k])
			}
		}
	}
	var anon int64
	d.Eventually(10*time.Second, "the monitor at rest under the bound", func() error {
		anon = rssAnon(t, mon)
		if anon > monitorAnonBound {
			return fmt.Errorf("monitor %d has %.1f MiB of anonymous memory, more than %d MiB", mon, float64(anon)/(1<<20), monitorAnonBound>>20)
		}
		return nil
	})
	t.Logf("monitor %d at rest: %.1f MiB anonymous", mon, float64(anon)/(1<<20))

	// A restarted daemon starts its monitors from the memfd the running
	// ones execute (the same program), pinning no second copy.
	d.Kill9()
	d.Start()
	d.WriteManifest("next.yaml", sleeper("next", ""))
	next := ppid(containerPID(d, d.WaitRunning("next", 30*time.Second), "main"))
	if embedsMonitor(t) {
		before, after := fileID(t, fmt.Sprintf("/proc/%d/exe", mon)), fileID(t, fmt.Sprintf("/proc/%d/exe", next))
		if before != after {
			t.Errorf("after a restart, the new monitor runs %s, the adopted one %s: another copy of the program", after, before)
		}
	}
	d.RemoveManifest("rest.yaml")
	d.RemoveManifest("next.yaml")
	d.Eventually(30*time.Second, "the pods are gone", func() error {
		if d.Pod("rest") != nil || d.Pod("next") != nil {
			return errStill
		}
		return nil
	})
	d.AssertNoLeaks()
}

// embedsMonitor tells whether the binary under test was built with the
// embedmonitor tag (make build), from its build information.
func embedsMonitor(t *testing.T) bool {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", testdaemon.Bin).Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", testdaemon.Bin, err)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "build" && strings.HasPrefix(f[1], "-tags=") {
			return slices.Contains(strings.Split(strings.TrimPrefix(f[1], "-tags="), ","), "embedmonitor")
		}
	}
	return false
}

// buildInfo is the build information of the Go program at path, by key:
// "go" for the toolchain, the build settings (-tags, vcs.revision, ...) by
// their names.
func buildInfo(t *testing.T, path string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", path).Output()
	if err != nil {
		t.Fatalf("go version -m %s: %v", path, err)
	}
	info := map[string]string{}
	for i, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		switch {
		case i == 0 && len(f) == 2:
			info["go"] = f[1]
		case len(f) == 2 && f[0] == "build":
			k, v, _ := strings.Cut(f[1], "=")
			info[k] = v
		}
	}
	return info
}

// fileID names the file at path (through a /proc magic link too) by device
// and inode.
func fileID(t *testing.T, path string) string {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Stat(path, &st); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%d:%d", st.Dev, st.Ino)
}

// rssAnon is pid's RssAnon in bytes.
func rssAnon(t *testing.T, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "RssAnon:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("RssAnon of %d: %q", pid, v)
			}
			return kb << 10
		}
	}
	t.Fatalf("no RssAnon for %d", pid)
	return 0
}

// The built binary carries no test-only hook: the monitor's pause points
// live in the oci tests' binary only (the testhooks tag), and no environment
// variable turns a test setting on (they are run's hidden flags).
func TestBinaryHasNoTestHooks(t *testing.T) {
	testroot.Require(t) // the binary is found or built for root tests only
	b, err := os.ReadFile(testdaemon.Bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, hook := range []string{"STATICPODD_TEST_MONITOR_PAUSE", "STATICPODD_TEST_NODE_CGROUP", "STATICPODD_TEST_NO_MEMORY_NOTIFIER"} {
		if bytes.Contains(b, []byte(hook)) {
			t.Errorf("%s holds %s", testdaemon.Bin, hook)
		}
	}
}
