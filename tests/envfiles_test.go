package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// env[].valueFrom.fileKeyRef, as the kubelet's node e2e "MirrorPod with
// EnvFiles" uses it: an init container writes key='value' lines into an
// emptyDir, the next container gets them as variables. A missing key of an
// optional variable leaves it out; of a required one, or a file that leads
// out of the volume, the container does not start
// (CreateContainerConfigError) and nothing of the host is read.
func TestEnvFiles(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	canary, unchanged := canaryDir(d)
	pod := func(name, write, extra string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
  volumes: [{name: config, emptyDir: {}}]
  initContainers:
  - {name: setup, image: busybox, command: ["sh", "-c", %q], volumeMounts: [{name: config, mountPath: /data}]}
  containers:
  - name: use
    image: busybox
    command: ["sh", "-c", "env | grep -E '^(CONFIG_|OPT|SECRET)' | sort"]
    env:
    - {name: CONFIG_1, valueFrom: {fileKeyRef: {volumeName: config, path: config.env, key: CONFIG_1}}}
    - {name: CONFIG_2, valueFrom: {fileKeyRef: {volumeName: config, path: config.env, key: CONFIG_2}}}
%s`, name, write, extra)
	}
	good := `echo CONFIG_1=\'value1\' > /data/config.env && echo CONFIG_2=\'two words\' >> /data/config.env`
	d.WriteManifest("good.yaml", pod("good", good,
		"    - {name: OPT, valueFrom: {fileKeyRef: {volumeName: config, path: config.env, key: OPT, optional: true}}}\n"))
	d.WriteManifest("nokey.yaml", pod("nokey", `echo CONFIG_1=\'value1\' > /data/config.env`, ""))
	d.WriteManifest("escape.yaml", pod("escape", "ln -s "+canary+"/secret /data/config.env", ""))
	d.Start()

	d.Eventually(60*time.Second, "pod good succeeded", func() error {
		if p := d.Pod("good"); p == nil || p.Status.Phase != v1.PodSucceeded {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if out := d.CLI("logs", "good", "-c", "use"); out != "CONFIG_1=value1\nCONFIG_2=two words\n" {
		t.Errorf("logs of good: %q, want CONFIG_1 and CONFIG_2 from the file, no OPT", out)
	}
	msg := waitingFor(d, "nokey", "use", "CreateContainerConfigError", 60*time.Second)
	if !strings.Contains(msg, `environment variable key "CONFIG_2" not found in file "config.env"`) {
		t.Errorf("nokey: message %q", msg)
	}
	msg = waitingFor(d, "escape", "use", "CreateContainerConfigError", 60*time.Second)
	if !strings.Contains(msg, "cannot open env file") || strings.Contains(msg, canary) {
		t.Errorf("escape: message %q, want it to say the file cannot be opened, and not where it leads", msg)
	}
	out, _ := d.CLIErr("logs", "escape", "-c", "use")
	unchanged(out)
}
