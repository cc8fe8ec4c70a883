package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// frozenProbeMargin is how long past its period and timeout an exec probe
// into a frozen pod may take to fail: the event's way to `events -w`, on a
// loaded machine.
const frozenProbeMargin = 5 * time.Second

// An exec probe into a pod whose cgroup is frozen (libcontainer still says
// Running: the exec's init freezes as it joins the container's cgroup)
// fails at its timeoutSeconds, with the kubelet's message, instead of
// holding the prober until the pod thaws; once thawed the pod is ready
// again, and no probe process is left.
func TestExecProbeIntoAFrozenPodFailsAtItsTimeout(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("frozen.yaml", `apiVersion: v1
kind: Pod
metadata: {name: frozen}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    readinessProbe:
      exec: {command: ["true"]}
      timeoutSeconds: 1
      periodSeconds: 2
      failureThreshold: 1
`)
	d.Start()
	ready := func() error {
		p := d.Pod("frozen")
		if p == nil || len(p.Status.ContainerStatuses) == 0 || !p.Status.ContainerStatuses[0].Ready {
			return fmt.Errorf("frozen not ready")
		}
		return nil
	}
	d.Eventually(30*time.Second, "frozen ready", ready)
	id := strings.TrimPrefix(d.Pod("frozen").Status.ContainerStatuses[0].ContainerID, "staticpodd://")
	ctrs, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/freezer", d.Cgroup, "*", id))
	if len(ctrs) != 1 {
		t.Skipf("no cgroup v1 freezer for container %s: %v", id, ctrs)
	}
	pod := filepath.Dir(ctrs[0])
	setFreezer := func(state string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(pod, "freezer.state"), []byte(state), 0); err != nil {
			t.Fatal(err)
		}
		d.Eventually(10*time.Second, "pod cgroup "+state, func() error {
			b, err := os.ReadFile(filepath.Join(pod, "freezer.state"))
			if err != nil || strings.TrimSpace(string(b)) != state {
				return fmt.Errorf("freezer.state %q, %v", b, err)
			}
			return nil
		})
	}

	w := watchEvents(t, d)
	if _, ok := w.line(30*time.Second, "LAST SEEN", "TYPE", "REASON"); !ok {
		t.Fatal("no header from events -w")
	}

	setFreezer("FROZEN")
	frozen := time.Now()
	thawed := false
	defer func() {
		if !thawed {
			setFreezer("THAWED")
		}
	}()
	// The first probe after the freeze starts within a period, and fails
	// at its timeout.
	bound := 2*time.Second + time.Second + frozenProbeMargin
	line, ok := w.line(time.Minute, "Unhealthy", "Readiness probe failed", "command timed out after 1s")
	if !ok {
		t.Fatalf("no Unhealthy event for the exec probe into the frozen pod within a minute:\n%s", d.CLI("ps", "-o", "wide"))
	}
	took := time.Since(frozen)
	t.Logf("the probe failed %v after the freeze: %s", took.Round(time.Millisecond), line)
	if took > bound {
		t.Errorf("the exec probe (period 2s, timeout 1s) failed %v after the freeze, want at most %v", took, bound)
	}
	// The prober went on: ready again once thawed.
	setFreezer("THAWED")
	thawed = true
	d.Eventually(30*time.Second, "frozen ready again once thawed", ready)
	// Nothing of the timed-out probes is left: no process in the container
	// but its own (sh and its sleep). The exec server stays while probes
	// come (oci/exec), so it is no sign of a leak.
	d.Eventually(30*time.Second, "no probe process left", func() error {
		var left []string
		b, _ := os.ReadFile(filepath.Join(ctrs[0], "cgroup.procs"))
		for _, pid := range strings.Fields(string(b)) {
			c, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			cmd := strings.ReplaceAll(strings.TrimRight(string(c), "\x00"), "\x00", " ")
			if !strings.HasPrefix(cmd, "sh -c trap") && cmd != "sleep 1" && cmd != "" {
				left = append(left, pid+" "+cmd)
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
}
