package tests

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// A regular container exits with a code its RestartAllContainers rule
// matches: every container is stopped and started again in the same pod,
// as the kubelet does (the pod of its node e2e test "should restart all
// containers on regular container exit", with an emptyDir that survives):
// the init container runs again, each container's restartCount is 1, its
// last termination the kubelet's RestartingAllContainers, and every
// container started after the exit.
func TestRestartAllContainersOnExit(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := filepath.Join(d.Dir, "runs")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	d.WriteManifest("reset.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: reset}
spec:
  restartPolicy: Never
  terminationGracePeriodSeconds: 2
  volumes:
  - {name: runs, hostPath: {path: %s}}
  - {name: work, emptyDir: {}}
  initContainers:
  - name: init
    image: busybox
    command: ["sh", "-c", "echo init >> /runs/log"]
    volumeMounts: [{name: runs, mountPath: /runs}]
  - name: sidecar
    image: busybox
    restartPolicy: Always
    command: ["sh", "-c", "sleep 10000"]
  containers:
  - name: source
    image: busybox
    restartPolicy: Never
    restartPolicyRules:
    - action: RestartAllContainers
      exitCodes: {operator: In, values: [42]}
    command: ["sh", "-c", "if [ -f /work/done ]; then sleep 10000; fi; touch /work/done; sleep 5; exit 42"]
    volumeMounts: [{name: work, mountPath: /work}]
  - name: regular
    image: busybox
    command: ["sh", "-c", "sleep 10000"]
`, dir))
	d.Start()

	// The source container runs 5s before it exits 42: every container
	// must start again after that.
	first := d.WaitRunning("reset", 60*time.Second)
	var exitAfter time.Time
	for _, cs := range first.Status.ContainerStatuses {
		if r := cs.State.Running; cs.Name == "source" && cs.RestartCount == 0 && r != nil {
			exitAfter = r.StartedAt.Add(4 * time.Second) // startedAt has whole seconds
		}
	}
	if exitAfter.IsZero() {
		t.Fatalf("source container not seen on its first run: %+v", first.Status.ContainerStatuses)
	}
	var p *v1.Pod
	d.Eventually(90*time.Second, "every container running again", func() error {
		p = d.Pod("reset")
		if p == nil {
			return fmt.Errorf("no pod")
		}
		for _, cs := range slices.Concat(p.Status.InitContainerStatuses[1:], p.Status.ContainerStatuses) {
			if cs.RestartCount != 1 || cs.State.Running == nil {
				return fmt.Errorf("%s: restartCount %d, state %+v", cs.Name, cs.RestartCount, cs.State)
			}
		}
		return nil
	})
	if p.Status.Phase != v1.PodRunning {
		t.Errorf("phase %s", p.Status.Phase)
	}
	for _, cs := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		if cs.RestartCount != 1 {
			t.Errorf("%s: restartCount %d, want 1", cs.Name, cs.RestartCount)
		}
		last := cs.LastTerminationState.Terminated
		if cs.Name != "init" && (last == nil || last.Reason != "RestartingAllContainers" || last.ExitCode != 137) {
			t.Errorf("%s: last termination %+v, want the kubelet's RestartingAllContainers, 137", cs.Name, last)
		}
		if r := cs.State.Running; r != nil && r.StartedAt.Time.Before(exitAfter) {
			t.Errorf("%s started at %v, before the source exited (after %v)", cs.Name, r.StartedAt, exitAfter)
		}
	}
	if init := p.Status.InitContainerStatuses[0]; init.State.Terminated == nil || init.State.Terminated.ExitCode != 0 {
		t.Errorf("init container %+v, want it completed again", init)
	}
	i := slices.IndexFunc(p.Status.Conditions, func(c v1.PodCondition) bool { return c.Type == v1.AllContainersRestarting })
	if i < 0 || p.Status.Conditions[i].Status != v1.ConditionFalse {
		t.Errorf("conditions %+v, want AllContainersRestarting false once restarted", p.Status.Conditions)
	}
	b, err := os.ReadFile(filepath.Join(dir, "log"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Fields(string(b)); !slices.Equal(got, []string{"init", "init"}) {
		t.Errorf("init container runs %q, want two", got)
	}
	d.RemoveManifest("reset.yaml")
	d.Eventually(60*time.Second, "the pod is gone", func() error {
		if d.Pod("reset") != nil {
			return errStill
		}
		return nil
	})
	d.AssertNoLeaks()
}
