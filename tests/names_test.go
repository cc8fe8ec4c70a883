package tests

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The longest names that fit the pod's log directory (<namespace>_<name>_<uid>
// is one file name, at most 255 bytes; the name is the manifest's, '-' and the
// node name) run, with the longest container name, and their logs work. One
// byte more is refused up front, naming the file and the field: validate says
// so and the daemon lists the manifest as a problem, where the kubelet would
// fail to make the directory at every sync and never run the pod.
func TestLongestPodNames(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Name += "." + strings.Repeat("n", 100) // a long node name takes its share
	d.Start()
	longest := 255 - len("default_") - len("-"+d.Name) - len("_") - 32
	manifest := func(n int) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: %s
    image: busybox
    command: ["sh", "-c", "echo hello from a long name; exec sleep 1000"]
`, strings.Repeat("p", n), strings.Repeat("c", 63))
	}
	d.WriteManifest("longest.yaml", manifest(longest))
	pod := d.WaitRunning(strings.Repeat("p", longest), 30*time.Second)
	if n := len(fmt.Sprintf("%s_%s_%s", pod.Namespace, pod.Name, pod.UID)); n != 255 {
		t.Fatalf("log directory name is %d bytes; the test means 255", n)
	}
	d.Eventually(10*time.Second, "its log", func() error {
		if out, err := d.CLIErr("logs", pod.Name); err != nil || out != "hello from a long name\n" {
			return fmt.Errorf("logs: %v %q", err, out)
		}
		return nil
	})

	d.WriteManifest("toolong.yaml", manifest(longest+1))
	out, err := d.CLIErr("validate", "--hostname-override", d.Name, filepath.Join(d.Manifests, "toolong.yaml"))
	if err == nil || !strings.Contains(out, "toolong.yaml: metadata.name: ") || !strings.Contains(out, "would be 256 bytes") {
		t.Errorf("validate of a name one byte too long: %v\n%s", err, out)
	}
	d.Eventually(15*time.Second, "ps names toolong.yaml", func() error {
		out, _ := d.CLIErr("ps")
		if !strings.Contains(out, "toolong.yaml") || !strings.Contains(out, "shorten it by 1") {
			return fmt.Errorf("ps output:\n%s", out)
		}
		return nil
	})
}
