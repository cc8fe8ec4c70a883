package tests

import (
	"fmt"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// canaryDir makes a host directory with a secret in it and returns a check
// that it is as it was: nothing read into a pod's log, nothing written.
func canaryDir(d *daemon) (dir string, unchanged func(logs ...string)) {
	d.T.Helper()
	dir = filepath.Join(d.Dir, "canary")
	secret := "host-secret-" + testdaemon.RandHex(8)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		d.T.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret"), []byte(secret), 0o644); err != nil {
		d.T.Fatal(err)
	}
	return dir, func(logs ...string) {
		d.T.Helper()
		ents, err := os.ReadDir(dir)
		if err != nil || len(ents) != 1 {
			d.T.Errorf("the host's canary dir changed: %v %v", ents, err)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "secret")); err != nil || string(b) != secret {
			d.T.Errorf("the host's canary file changed: %q %v", b, err)
		}
		for _, l := range logs {
			if strings.Contains(l, secret) {
				d.T.Errorf("a container read the host's secret: %q", l)
			}
		}
	}
}

// waitingFor waits until container name of pod waits for reason, and returns
// the message.
func waitingFor(d *daemon, pod, name, reason string, timeout time.Duration) string {
	d.T.Helper()
	var msg string
	d.Eventually(timeout, pod+"/"+name+" waits with "+reason, func() error {
		p := d.Pod(pod)
		if p == nil {
			return fmt.Errorf("no pod")
		}
		for _, cs := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
			if cs.Name != name {
				continue
			}
			if w := cs.State.Waiting; w != nil && w.Reason == reason {
				msg = w.Message
				return nil
			}
			return fmt.Errorf("state %+v", cs.State)
		}
		return fmt.Errorf("no status of %s", name)
	})
	return msg
}

// The kubelet's CVE-2017-1002101 class: a container that can write a volume
// replaces a subPath with a symlink out of it. The container that mounts the
// subPath must not start, and the host must be untouched.
func TestSubPathSymlinkEscapeRefused(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	canary, unchanged := canaryDir(d)
	pod := func(name, evil, subPath string) string {
		return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  restartPolicy: Never
  volumes: [{name: e, emptyDir: {}}]
  initContainers:
  - {name: evil, image: busybox, command: ["sh", "-c", %q], volumeMounts: [{name: e, mountPath: /e}]}
  containers:
  - name: victim
    image: busybox
    command: ["sh", "-c", "cat /v/secret /v/etc/shadow /v/x/secret; echo pwned > /v/pwned; ls -la /v"]
    volumeMounts: [{name: e, mountPath: /v, subPath: %s}]
`, name, evil, subPath)
	}
	cases := map[string]string{
		// The reproduction: the host's root.
		"root": pod("root", "rm -rf /e/sub; ln -s / /e/sub", "sub"),
		// A host directory, read and written through.
		"absolute": pod("absolute", "ln -s "+canary+" /e/sub", "sub"),
		// Out by ../, as deep as it takes.
		"relative": pod("relative", "ln -s ../../../../../../../../../.."+canary+" /e/sub", "sub"),
		// A link at an intermediate component, the rest of the subPath missing.
		"intermediate": pod("intermediate", "ln -s "+canary+" /e/a", "a/x"),
	}
	// A hostPath's subPath is held inside the hostPath the same way: here a
	// link another pod (with the hostPath too) could have made.
	shared := filepath.Join(d.Dir, "shared")
	if err := os.MkdirAll(shared, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(canary, filepath.Join(shared, "sub")); err != nil {
		t.Fatal(err)
	}
	cases["hostpath"] = fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hostpath}
spec:
  restartPolicy: Never
  volumes: [{name: h, hostPath: {path: %s}}]
  containers:
  - name: victim
    image: busybox
    command: ["sh", "-c", "cat /v/secret; echo pwned > /v/pwned"]
    volumeMounts: [{name: h, mountPath: /v, subPath: sub}]
`, shared)
	for name, m := range cases {
		d.WriteManifest(name+".yaml", m)
	}
	d.Start()
	for name := range cases {
		msg := waitingFor(d, name, "victim", "CreateContainerConfigError", 60*time.Second)
		if !strings.Contains(msg, "leaves the volume") || !strings.Contains(msg, "volumeMount at /v") {
			t.Errorf("%s: message %q, want it to say the subPath of /v leaves the volume", name, msg)
		}
		if strings.Contains(msg, canary) {
			t.Errorf("%s: the message tells where the link points: %q", name, msg)
		}
	}
	var logs []string
	for name := range cases {
		out, _ := d.CLIErr("logs", name, "-c", "victim")
		logs = append(logs, out)
	}
	unchanged(logs...)
	if _, err := os.Stat("/pwned"); err == nil {
		t.Error("/pwned exists on the host")
		os.Remove("/pwned")
	}
	for name := range cases {
		d.RemoveManifest(name + ".yaml")
	}
	d.Eventually(60*time.Second, "every pod removed", func() error {
		if n := len(d.Pods()); n > 0 {
			return fmt.Errorf("%d pods left", n)
		}
		return nil
	})
	d.AssertNoLeaks()
	unchanged()
}

// A running sibling swaps the subPath for a symlink before the victim
// restarts: the restart is refused, the victim never sees the host.
func TestSubPathSwappedBySiblingBeforeRestart(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	canary, unchanged := canaryDir(d)
	d.WriteManifest("swap.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: swap}
spec:
  terminationGracePeriodSeconds: 2
  volumes: [{name: e, emptyDir: {}}, {name: sync, emptyDir: {}}]
  containers:
  - name: victim
    image: busybox
    command: ["sh", "-c", "ls /v; cat /v/secret; touch /sync/ran; until [ -e /sync/swapped ]; do sleep 0.1; done; exit 1"]
    volumeMounts: [{name: e, mountPath: /v, subPath: sub}, {name: sync, mountPath: /sync}]
  - name: evil
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; until [ -e /sync/ran ]; do sleep 0.1; done; rm -rf /e/sub; ln -s %s /e/sub; touch /sync/swapped; while true; do sleep 1 & wait $!; done"]
    volumeMounts: [{name: e, mountPath: /e}, {name: sync, mountPath: /sync}]
`, canary))
	d.Start()
	msg := waitingFor(d, "swap", "victim", "CreateContainerConfigError", 60*time.Second)
	if !strings.Contains(msg, "leaves the volume") {
		t.Errorf("message %q, want it to say the subPath leaves the volume", msg)
	}
	p := d.Pod("swap")
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "victim" && (cs.LastTerminationState.Terminated == nil || cs.LastTerminationState.Terminated.ExitCode != 1) {
			t.Errorf("victim's last state %+v, want its first run's exit 1", cs.LastTerminationState)
		}
	}
	out, _ := d.CLIErr("logs", "swap", "-c", "victim")
	unchanged(out)
	d.RemoveManifest("swap.yaml")
	d.Eventually(60*time.Second, "pod removed", func() error {
		if d.Pod("swap") != nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	d.AssertNoLeaks()
}

// subPath and subPathExpr bind the path inside the volume, made if missing,
// and what a container writes there is in the volume; removing the pod
// leaves no bind behind and the volume's data went with the pod, not before.
func TestSubPathAndSubPathExpr(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("sub.yaml", `apiVersion: v1
kind: Pod
metadata: {name: sub}
spec:
  terminationGracePeriodSeconds: 2
  volumes: [{name: e, emptyDir: {}}]
  initContainers:
  - name: writer
    image: busybox
    env: [{name: POD, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
    command: ["sh", "-c", "echo by-expr > /x/file; echo by-path > /p/file"]
    volumeMounts:
    - {name: e, mountPath: /x, subPathExpr: "logs/$(POD)"}
    - {name: e, mountPath: /p, subPath: deep/dir}
  containers:
  - name: reader
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; cat /e/logs/*/file /e/deep/dir/file; ls /e/logs; touch /e/ready; while true; do sleep 1 & wait $!; done"]
    volumeMounts: [{name: e, mountPath: /e}]
`)
	d.Start()
	p := d.WaitRunning("sub", 60*time.Second)
	d.Eventually(30*time.Second, "reader printed the files", func() error {
		if out := d.CLI("logs", "sub", "-c", "reader"); out != "by-expr\nby-path\n"+p.Name+"\n" {
			return fmt.Errorf("reader printed %q", out)
		}
		return nil
	})
	d.RemoveManifest("sub.yaml")
	d.Eventually(60*time.Second, "pod removed", func() error {
		if d.Pod("sub") != nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	d.AssertNoLeaks()
}
