package tests

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A container leaves a FIFO and device nodes (a block device, 254:0 is a
// virtio disk, and /dev/mem) in an emptyDir; the next container mounts them
// as subPaths. The daemon must not block opening them, and the devices
// cgroup, not the bind, decides what a node opens. (A socket: the oci
// package's TestAttackSubPathSpecialFilesDoNotBlock.)
func TestAttackSubPathSpecialFiles(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("special.yaml", `apiVersion: v1
kind: Pod
metadata: {name: special}
spec:
  restartPolicy: Never
  volumes: [{name: e, emptyDir: {}}]
  initContainers:
  - name: evil
    image: busybox
    command: ["sh", "-c", "mkfifo /e/fifo; mknod /e/disk b 254 0; mknod /e/mem c 1 1; mknod /e/null c 1 3; ls -la /e"]
    volumeMounts: [{name: e, mountPath: /e}]
  containers:
  - name: victim
    image: busybox
    command: ["sh", "-c", "ls -la /f /d /m /n; head -c 16 /d | od | head -1; head -c 16 /m | od | head -1; echo hi > /n && echo null-ok; echo done"]
    volumeMounts:
    - {name: e, mountPath: /f, subPath: fifo}
    - {name: e, mountPath: /d, subPath: disk}
    - {name: e, mountPath: /m, subPath: mem}
    - {name: e, mountPath: /n, subPath: "null"}
`)
	d.Start()
	d.Eventually(60*time.Second, "victim ran", func() error {
		p := d.Pod("special")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			return fmt.Errorf("no status")
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.State.Terminated == nil {
			return fmt.Errorf("state %+v", cs.State)
		}
		return nil
	})
	evil, _ := d.CLIErr("logs", "special", "-c", "evil")
	out, _ := d.CLIErr("logs", "special", "-c", "victim")
	t.Logf("evil:\n%s\nvictim:\n%s", evil, out)
	for _, want := range []string{"head: /d: Operation not permitted", "head: /m: Operation not permitted", "null-ok", "done"} {
		if !strings.Contains(out, want) {
			t.Errorf("victim printed %q, want %q in it", out, want)
		}
	}
	d.RemoveManifest("special.yaml")
	d.Eventually(60*time.Second, "pod removed", func() error {
		if d.Pod("special") != nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	d.AssertNoLeaks()
}
