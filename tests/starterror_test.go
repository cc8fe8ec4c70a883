package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// A command that does not exist is reported as the kubelet on containerd
// reports it: the container terminated with reason StartError, exit code 128
// and the runtime's error. Under restartPolicy Always it is restarted with the
// crash-loop back-off (at once, then after 10s), waiting CrashLoopBackOff with
// the failure as lastState and a growing restartCount; under Never it stays
// terminated and the pod fails. ps says the same as /pods.
func TestCommandNotFoundIsStartError(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	nope := func(name, policy string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: %s
  containers:
  - name: main
    image: busybox
    command: ["/nope"]
`, name, policy)
	}
	const why = `exec: "/nope": stat /nope: no such file or directory`
	startError := func(s *v1.ContainerStateTerminated) error {
		if s == nil || s.Reason != "StartError" || s.ExitCode != 128 || !strings.Contains(s.Message, why) {
			return fmt.Errorf("terminated %+v, want StartError 128 with %q", s, why)
		}
		return nil
	}
	d.WriteManifest("never.yaml", nope("never", "Never"))
	d.WriteManifest("always.yaml", nope("always", "Always"))

	d.Eventually(30*time.Second, "never terminated with StartError", func() error {
		p := d.Pod("never")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("pod %+v", p)
		}
		if p.Status.Phase != v1.PodFailed {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return startError(p.Status.ContainerStatuses[0].State.Terminated)
	})

	var restarted [3]time.Time // when restartCount first reached 1 and 2
	d.Eventually(40*time.Second, "always restarted twice", func() error {
		p := d.Pod("always")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("pod %+v", p)
		}
		cs := p.Status.ContainerStatuses[0]
		if n := cs.RestartCount; n > 0 && n < 3 && restarted[n].IsZero() {
			restarted[n] = time.Now()
		}
		if cs.RestartCount == 0 {
			return fmt.Errorf("restartCount 0")
		}
		if err := startError(cs.LastTerminationState.Terminated); err != nil {
			t.Errorf("lastState after restart: %v", err)
		}
		if w := cs.State.Waiting; w == nil || (w.Reason != "CrashLoopBackOff" && w.Reason != "RunContainerError") {
			t.Errorf("state %+v, want waiting CrashLoopBackOff or RunContainerError", cs.State)
		}
		if cs.RestartCount < 2 {
			return fmt.Errorf("restartCount %d", cs.RestartCount)
		}
		return nil
	})
	if gap := restarted[2].Sub(restarted[1]); gap < 9*time.Second || gap > 13*time.Second {
		t.Errorf("second restart %v after the first, want the 10s back-off", gap.Round(100*time.Millisecond))
	}

	// During its 20s back-off, ps shows what /pods says.
	out := d.CLI("ps")
	for name, want := range map[string]string{"never": "StartError", "always": "CrashLoopBackOff"} {
		line := ""
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, name+"-"+d.Name) {
				line = l
			}
		}
		if f := strings.Fields(line); len(f) < 5 || f[2] != "0/1" || f[3] != want {
			t.Errorf("ps line of %s = %q, want 0/1 %s\n%s", name, line, want, out)
		}
	}
	if out := d.CLI("ps", "-o", "wide"); !strings.Contains(out, "Terminated:StartError(128)") {
		t.Errorf("ps -o wide does not show the never pod's container as Terminated:StartError(128):\n%s", out)
	}
}
