//go:build controlplane

package mirror

import (
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// rollbackSleeper is sleeper with a rollback-after, running cmd.
func rollbackSleeper(name, env, cmd string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
  annotations:
    staticpodd.io/rollback-after: 6s
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: main
    image: busybox
    env: [{name: GEN, value: %q}]
    command: ["sh", "-c", %q]
`, name, env, cmd)
}

const sleepLoop = "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"

// The mirror pod of a generation brought back by a rollback says so with
// the condition staticpodd.io/RolledBack, as kubectl shows it, until the
// file changes again.
func TestMirrorPodOfRollback(t *testing.T) {
	f := newFixture(t)
	f.d.WriteManifest("rb.yaml", rollbackSleeper("rb", "1", sleepLoop))
	f.d.Start()
	good := f.waitMirror("rb", 60*time.Second, "the first generation's mirror pod running", running)
	f.d.Eventually(30*time.Second, "the first generation passes its rollout", func() error {
		if out := f.d.CLI("rollout", "status", "rb"); !strings.HasPrefix(out, "ready:") {
			return fmt.Errorf("rollout status: %s", out)
		}
		return nil
	})

	f.d.WriteManifest("rb.yaml", rollbackSleeper("rb", "2", "echo broken; exit 3"))
	name := "rb-" + f.d.Name
	jsonpath := `jsonpath={.metadata.annotations.kubernetes\.io/config\.mirror} {.status.conditions[?(@.type=="staticpodd.io/RolledBack")].status} {.status.conditions[?(@.type=="staticpodd.io/RolledBack")].reason}`
	want := good.Annotations[annotationMirror] + " True RolledBack"
	f.d.Eventually(90*time.Second, "kubectl shows the rollback on the mirror pod", func() error {
		out, err := f.c.Kubectl("get", "pod", "-n", "default", name, "-o", jsonpath)
		if err != nil {
			return err
		}
		if out != want {
			return fmt.Errorf("kubectl get pod: %q, want %q", out, want)
		}
		return nil
	})
	describe, err := f.c.Kubectl("describe", "pod", "-n", "default", name)
	if err != nil || !regexp.MustCompile(`(?m)^\s*staticpodd\.io/RolledBack\s+True\s*$`).MatchString(describe) {
		t.Errorf("kubectl describe does not list the condition: %v\n%s", err, describe)
	}
	if m := f.mirror("rb"); m != nil {
		for _, c := range m.Status.Conditions {
			if c.Type == "staticpodd.io/RolledBack" && (!strings.Contains(c.Message, "exit code 3") || len(c.Message) > 1024) {
				t.Errorf("condition message %q", c.Message)
			}
		}
	}

	// A fix of the file lifts it: the new generation's mirror pod has none.
	f.d.WriteManifest("rb.yaml", rollbackSleeper("rb", "3", sleepLoop))
	fixed := f.waitGeneration("rb", "3")
	f.waitMirror("rb", 60*time.Second, "the fixed generation's mirror pod", func(p *v1.Pod) error {
		if p.Annotations[annotationMirror] != string(fixed.UID) {
			return fmt.Errorf("mirror of %s, want %s", p.Annotations[annotationMirror], fixed.UID)
		}
		return running(p)
	})
	out, err := f.c.Kubectl("get", "pod", "-n", "default", name, "-o", jsonpath)
	if err != nil || out != string(fixed.UID)+"  " {
		t.Errorf("kubectl get pod after the fix: %q %v", out, err)
	}
}
