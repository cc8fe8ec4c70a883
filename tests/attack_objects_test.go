package tests

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

// A hostile container (root in it, the default capabilities) cannot change
// what its secret volume shows: the files, ..data and the tmpfs are
// read-only to it whatever it tries, and the host's copy keeps the value.
func TestSecretVolumeHostileContainer(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("tok.yaml", "apiVersion: v1\nkind: Secret\nmetadata: {name: tok}\nstringData: {token: original}\n")
	script := strings.Join([]string{
		`for op in "touch /s/new" "rm -f /s/token" "rm -f /s/..data" "ln -sfn / /s/..data" "sh -c 'echo evil > /s/..data/token'" "mv /s/..data /s/old" "mount -o remount,rw /s" "chmod 777 /s"; do if eval "$op" 2>/dev/null; then echo "ALLOWED: $op"; fi; done`,
		`echo token=$(cat /s/token)`,
		`echo done`,
		`sleep 3600`,
	}, "; ")
	cmd, _ := json.Marshal([]string{"sh", "-c", script})
	d.WriteManifest("app.yaml", `apiVersion: v1
kind: Pod
metadata: {name: app}
spec:
  terminationGracePeriodSeconds: 1
  volumes: [{name: s, secret: {secretName: tok}}]
  containers:
  - name: main
    image: busybox
    securityContext: {runAsUser: 0}
    volumeMounts: [{name: s, mountPath: /s}]
    command: `+string(cmd)+`
`)
	d.WaitRunning("app", 60*time.Second)
	var logs string
	d.Eventually(60*time.Second, "the attempts made", func() error {
		if logs = d.CLI("logs", "app"); !strings.Contains(logs, "done") {
			return errStill
		}
		return nil
	})
	if strings.Contains(logs, "ALLOWED") || !strings.Contains(logs, "token=original") {
		t.Errorf("container's attempts on its secret volume:\n%s", logs)
	}
	d.RemoveManifest("app.yaml")
	d.Eventually(30*time.Second, "pod gone", func() error {
		if len(d.Pods()) > 0 {
			return errStill
		}
		return nil
	})
	d.AssertNoLeaks()
}
