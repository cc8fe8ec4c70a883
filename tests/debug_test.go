package tests

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// debugPod serves "hello from web" with httpd on the pod's 127.0.0.1:81,
// which only a process in the pod's network namespace reaches.
const debugPod = `apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "mkdir -p /www && echo hello from web > /www/index.html && httpd -p 127.0.0.1:81 -h /www; trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`

// debugCmd is `staticpodd debug` with args for this daemon.
func debugCmd(d *daemon, args ...string) *exec.Cmd {
	return exec.Command(testdaemon.Bin, append([]string{"debug", "--root-dir", d.RootDir, "--run-dir", d.RunDir}, args...)...)
}

// debugOut runs `staticpodd debug` and returns its stdout, stderr and exit code.
func debugOut(d *daemon, stdin io.Reader, args ...string) (string, string, int) {
	d.T.Helper()
	cmd := debugCmd(d, args...)
	var out, errOut bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, &out, &errOut
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		d.T.Fatal(err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// hostState is what of the daemon's state a container adds to the host:
// mounts under its dirs, cgroups under its cgroup root, libcontainer
// state, image snapshots, container and debug state dirs.
func hostState(t *testing.T, d *daemon) string {
	t.Helper()
	var b strings.Builder
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	var mounts []string
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) >= 5 && (strings.HasPrefix(f[4], d.RootDir) || strings.HasPrefix(f[4], d.RunDir)) {
			mounts = append(mounts, f[4])
		}
	}
	slices.Sort(mounts)
	fmt.Fprintf(&b, "mounts %v\n", mounts)
	_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup", d.Cgroup), func(p string, de fs.DirEntry, err error) error {
		if err == nil && de.IsDir() {
			fmt.Fprintf(&b, "cgroup %s\n", p)
		}
		return nil
	})
	for _, dir := range []string{filepath.Join(d.RunDir, "libcontainer"), filepath.Join(d.RootDir, "images", "snapshots"),
		filepath.Join(d.RunDir, "containers"), filepath.Join(d.RunDir, "debug")} {
		fmt.Fprintf(&b, "%s %v\n", dir, dirNames(t, dir))
	}
	return b.String()
}

// waitDebugging waits until pod web shows one running ephemeral container,
// with its container ID once its process runs, and returns the pod.
func waitDebugging(d *daemon) *v1.Pod {
	d.T.Helper()
	var pod *v1.Pod
	d.Eventually(30*time.Second, "the debug container in the pod's status", func() error {
		pod = d.Pod("web")
		if pod == nil || len(pod.Status.EphemeralContainerStatuses) != 1 || pod.Status.EphemeralContainerStatuses[0].State.Running == nil ||
			pod.Status.EphemeralContainerStatuses[0].ContainerID == "" {
			return errStill
		}
		return nil
	})
	return pod
}

// TestDebug runs debug containers in a running pod: they share its network
// and UTS namespaces, see its processes with --target only, pass their exit
// code through, show in the pod's status while they run, change nothing of
// the pod, and leave nothing behind, whether the command exits, the client
// goes away at any point of the start, or the pod is removed.
func TestDebug(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", debugPod)
	pod := d.WaitRunning("web", 30*time.Second)
	main := pod.Status.ContainerStatuses[0].ContainerID
	d.Eventually(10*time.Second, "httpd listening", func() error {
		if out, _, _ := execOut(d, "", "web", "--", "wget", "-qO-", "http://127.0.0.1:81/"); out != "hello from web\n" {
			return errStill
		}
		return nil
	})
	before := hostState(t, d)

	out, errOut, code := debugOut(d, nil, "web", "--image", "busybox", "--", "sh", "-c", "wget -qO- http://127.0.0.1:81/; hostname; exit 7")
	if want := "hello from web\n" + pod.Name + "\n"; out != want || code != 7 {
		t.Errorf("debug wget, hostname, exit 7: stdout %q (stderr %q), exit %d; want %q and 7", out, errOut, code, want)
	}
	// Its own PID namespace by default; the target's with --target.
	if out, errOut, code := debugOut(d, nil, "web", "--image", "busybox", "--", "ps", "-o", "args"); code != 0 || strings.Contains(out, "httpd") {
		t.Errorf("debug ps without --target: exit %d, %q (stderr %q); want the debug container's processes alone", code, out, errOut)
	}
	if out, errOut, code := debugOut(d, nil, "web", "--image", "busybox", "--target", "main", "--", "ps", "-o", "args"); code != 0 || !strings.Contains(out, "httpd -p 127.0.0.1:81") {
		t.Errorf("debug --target main ps: exit %d, %q (stderr %q); want main's httpd among them", code, out, errOut)
	}

	// While it runs, the pod's status shows it, as the kubelet's does.
	r, w := io.Pipe()
	done := make(chan string, 1)
	go func() {
		out, errOut, code := debugOut(d, r, "-i", "web", "--image", "busybox", "--", "sh", "-c", "read x; echo got $x; exit 5")
		done <- fmt.Sprintf("%q %q %d", out, errOut, code)
	}()
	running := waitDebugging(d)
	ec, es := running.Spec.EphemeralContainers, running.Status.EphemeralContainerStatuses[0]
	if len(ec) != 1 || !strings.HasPrefix(ec[0].Name, "debugger-") || len(ec[0].Name) != len("debugger-xxxxx") ||
		ec[0].Image != "busybox" || !ec[0].Stdin || es.Name != ec[0].Name || es.Ready {
		t.Errorf("ephemeral container %+v, status %+v; want debugger-xxxxx, busybox, stdin, running and not ready", ec, es)
	}
	id, _ := strings.CutPrefix(es.ContainerID, "staticpodd://")
	if got := dirNames(t, filepath.Join(d.RunDir, "debug")); len(got) != 1 || got[0] != id {
		t.Errorf("container ID %q, state dirs of debug containers %v; want the one of its ID", es.ContainerID, got)
	}
	if out := d.CLI("ps", "-o", "wide", "web"); !regexp.MustCompile(`(?m)^default/` + pod.Name + ` +` + ec[0].Name + ` +Running .* ` + id + ` +busybox$`).MatchString(out) {
		t.Errorf("ps -o wide does not show the debug container %s running:\n%s", ec[0].Name, out)
	}
	if out := d.CLI("describe", "web"); !strings.Contains(out, "Ephemeral Containers:\n  "+ec[0].Name+":\n") {
		t.Errorf("describe does not show the debug container %s:\n%s", ec[0].Name, out)
	}
	var evs v1.EventList
	if err := json.Unmarshal([]byte(d.CLI("events", "-o", "json")), &evs); err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, e := range evs.Items {
		if e.InvolvedObject.FieldPath == "spec.ephemeralContainers{"+ec[0].Name+"}" {
			reasons = append(reasons, e.Reason)
		}
	}
	if want := []string{"Pulled", "Created", "Started"}; !slices.Equal(reasons, want) {
		t.Errorf("events of the debug container %s: %v, want %v", ec[0].Name, reasons, want)
	}
	if running.UID != pod.UID || running.Status.ContainerStatuses[0].ContainerID != main || running.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the pod changed under the debug container: UID %s, containers %+v", running.UID, running.Status.ContainerStatuses)
	}
	fmt.Fprintln(w, "input")
	w.Close()
	if got, want := <-done, `"got input\n" "" 5`; got != want {
		t.Errorf("debug -i: %s, want %s", got, want)
	}
	if p := d.Pod("web"); len(p.Status.EphemeralContainerStatuses) != 0 || len(p.Spec.EphemeralContainers) != 0 {
		t.Errorf("the ended debug container is still in the pod: %+v", p.Status.EphemeralContainerStatuses)
	}

	for _, tc := range []struct {
		args   []string
		stderr string
	}{
		{[]string{"web", "--image", "Not A Reference", "--", "true"}, "invalid debug request"},
		{[]string{"web", "--image", "busybox", "--target", "nope", "--", "true"}, `has no container "nope"`},
		{[]string{"web", "--image", "busybox", "--", "no-such-command"}, "command not found"},
		{[]string{"web", "--image", "127.0.0.1:1/none:1", "--", "true"}, "127.0.0.1:1/none:1"},
		{[]string{"nope", "--image", "busybox", "--", "true"}, `no pod "nope"`},
	} {
		if _, errOut, code := debugOut(d, nil, tc.args...); code == 0 || !strings.Contains(errOut, tc.stderr) {
			t.Errorf("debug %q: exit %d, stderr %q; want a failure saying %q", tc.args, code, errOut, tc.stderr)
		}
	}
	if got := d.Pod("web"); got.Status.ContainerStatuses[0].ContainerID != main {
		t.Errorf("main was restarted: %+v", got.Status.ContainerStatuses)
	}

	// A client killed at any point of the start, or while the container
	// runs, leaves nothing.
	for delay := time.Duration(0); delay < 400*time.Millisecond; delay += 40 * time.Millisecond {
		cmd := debugCmd(d, "web", "--image", "busybox", "--", "sleep", "1000")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		cmd.Process.Kill()
		cmd.Wait()
	}
	d.Eventually(30*time.Second, "nothing left of the debug containers", func() error {
		if now := hostState(t, d); now != before {
			return fmt.Errorf("host state\n%s\nwant as before the debug containers\n%s", now, before)
		}
		if p := d.Pod("web"); len(p.Status.EphemeralContainerStatuses) != 0 {
			return fmt.Errorf("ephemeral containers %+v", p.Status.EphemeralContainerStatuses)
		}
		return nil
	})

	// A pod removed during a debug takes the debug container with it.
	cmd := debugCmd(d, "web", "--image", "busybox", "--", "sleep", "1000")
	var errBuf bytes.Buffer
	cmd.Stderr = &errBuf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitDebugging(d)
	d.RemoveManifest("web.yaml")
	if err := cmd.Wait(); err == nil || !strings.Contains(errBuf.String(), "the pod is being removed") {
		t.Errorf("debug of a removed pod ended with %v, stderr %q; want a failure saying the pod is removed", err, errBuf.String())
	}
	d.Eventually(30*time.Second, "the pod is gone", func() error {
		if d.Pod("web") != nil {
			return errStill
		}
		return nil
	})
	d.AssertNoLeaks()
}

// TestDebugTTY drives `staticpodd debug -i -t` from a real terminal.
func TestDebugTTY(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", debugPod)
	d.WaitRunning("web", 30*time.Second)
	term, _, exited := startTTY(t, debugCmd(d, "-i", "-t", "web", "--image", "busybox", "--target", "main", "--", "sh"), 100, 30)
	out := term.run(t, "tty; stty size; pidof httpd >/dev/null && echo sees''httpd; echo do''ne", "done")
	if !strings.Contains(out, "\r\n/dev/pts/") || !strings.Contains(out, "\r\n30 100\r\n") || !strings.Contains(out, "seeshttpd") {
		t.Errorf("debug -it printed %q, want a /dev/pts terminal of 30 rows, 100 columns, and main's httpd", out)
	}
	term.write(t, "exit 4\r")
	select {
	case err := <-exited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 4 {
			t.Errorf("debug -it ended with %v, want exit status 4", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("debug -it did not end after exit")
	}
	d.Eventually(10*time.Second, "no debug container left", func() error {
		if names := dirNames(t, filepath.Join(d.RunDir, "debug")); len(names) > 0 {
			return fmt.Errorf("debug state %v", names)
		}
		return nil
	})
}

// TestDebugDaemonDies: a debug container whose daemon is killed (SIGKILL)
// keeps running, as an exec does, and the next daemon removes it with every
// trace of it, the pod left running; a daemon stopped (SIGTERM) removes its
// debug containers itself.
func TestDebugDaemonDies(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	d.WriteManifest("web.yaml", debugPod)
	pod := d.WaitRunning("web", 30*time.Second)
	initPID := containerPID(d, pod, "main")
	before := hostState(t, d)
	marker := "98" + strconv.Itoa(int(time.Now().UnixNano()%1000000))
	cli, sleepPID := startDebugSleep(d, marker)
	d.Kill9()
	cli.Wait()
	if !procAlive(sleepPID) {
		t.Fatalf("the debug container's process %d died with the daemon", sleepPID)
	}
	if names := dirNames(t, filepath.Join(d.RunDir, "debug")); len(names) != 1 {
		t.Fatalf("debug state %v, want the one of the container left", names)
	}
	// Without a daemon, nothing would remove a debug container: refused.
	if _, errOut, code := debugOut(d, nil, "web", "--image", "busybox", "--", "true"); code == 0 || !strings.Contains(errOut, "the daemon is not running") {
		t.Errorf("debug with no daemon: exit %d, stderr %q; want a refusal saying the daemon is not running", code, errOut)
	}
	d.Start()
	d.Eventually(30*time.Second, "the next daemon removes the debug container", func() error {
		if procAlive(sleepPID) {
			return fmt.Errorf("process %d still runs", sleepPID)
		}
		if now := hostState(t, d); now != before {
			return fmt.Errorf("host state\n%s\nwant\n%s", now, before)
		}
		return nil
	})
	if !procAlive(initPID) {
		t.Errorf("the pod's container %d died too", initPID)
	}

	// A daemon stopped (SIGTERM) ends its debug containers and removes them
	// before it exits; the pod runs on.
	marker = "97" + strconv.Itoa(int(time.Now().UnixNano()%1000000))
	cli, sleepPID = startDebugSleep(d, marker)
	d.Stop()
	cli.Wait()
	if procAlive(sleepPID) {
		t.Errorf("the debug container's process %d outlived the daemon's stop", sleepPID)
	}
	if now := hostState(t, d); now != before {
		t.Errorf("after the daemon's stop, host state\n%s\nwant\n%s", now, before)
	}
	if !procAlive(initPID) {
		t.Errorf("the pod's container %d died with the daemon's stop", initPID)
	}
}

// startDebugSleep starts `staticpodd debug web -- sleep marker` and returns
// it with the pid of its sleep once that runs. A client that exits first
// fails the test with what it said.
func startDebugSleep(d *daemon, marker string) (*exec.Cmd, int) {
	d.T.Helper()
	cli := debugCmd(d, "web", "--image", "busybox", "--", "sleep", marker)
	var stderr lockedBuffer
	cli.Stderr = &stderr
	if err := cli.Start(); err != nil {
		d.T.Fatal(err)
	}
	var pid int
	d.Eventually(30*time.Second, "the debug container's sleep runs", func() error {
		if pid = findCmdline("sleep\x00" + marker); pid != 0 {
			return nil
		}
		// Exited, not yet waited for: a zombie.
		if st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cli.Process.Pid)); err == nil && bytes.Contains(st, []byte(") Z ")) {
			d.T.Fatalf("staticpodd debug exited before its sleep ran; stderr %q\ndaemon output:\n%s", stderr.String(), d.OutputTail())
		}
		return fmt.Errorf("not yet; the client's stderr so far %q", stderr.String())
	})
	return cli, pid
}

// TestDebugPullsItsImage: a debug image the node lacks is pulled
// (imagePullPolicy IfNotPresent) and kept; one that cannot be pulled is an
// error naming it, with nothing left.
func TestDebugPullsItsImage(t *testing.T) {
	t.Parallel()
	r := newPullRegistry(t)
	d := pullDaemon(t, r)
	r.push(testdaemon.Image, "tools/debug:1")
	d.Start()
	d.WriteManifest("web.yaml", debugPod)
	d.WaitRunning("web", 30*time.Second)
	before := hostState(t, d)
	image := r.addr + "/tools/debug:1"
	if out, errOut, code := debugOut(d, nil, "web", "--image", image, "--", "echo", "pulled"); out != "pulled\n" || code != 0 {
		t.Errorf("debug with an image to pull: %q (stderr %q), exit %d; want it run", out, errOut, code)
	}
	if out := d.CLI("images", "ls"); !strings.Contains(out, r.addr+"/tools/debug") {
		t.Errorf("the pulled debug image is not in the store:\n%s", out)
	}
	missing := r.addr + "/tools/none:1"
	if _, errOut, code := debugOut(d, nil, "web", "--image", missing, "--", "true"); code == 0 || !strings.Contains(errOut, "image "+missing+": ErrImagePull") {
		t.Errorf("debug with an image the registry lacks: exit %d, stderr %q; want an ErrImagePull error naming it", code, errOut)
	}
	d.Eventually(10*time.Second, "nothing left of the debug containers", func() error {
		if now := hostState(t, d); now != before {
			return fmt.Errorf("host state\n%s\nwant\n%s", now, before)
		}
		return nil
	})
}
