package tests

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// hostDir is a directory of the test's, mounted at /s in the pods that get it.
func hostDir(t *testing.T, d *daemon, name string) string {
	t.Helper()
	dir := filepath.Join(d.Dir, name)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readFile(path string) string {
	b, _ := os.ReadFile(path)
	return string(b)
}

// forever runs until its stop signal sig, and writes which one it got to
// /s/<name>; /tmp/trapped says it catches it.
func forever(name, sig string) string {
	return fmt.Sprintf("trap 'echo %s > /s/%s; exit 0' %s; touch /tmp/trapped; while true; do sleep 1 & wait $!; done",
		strings.ToLower(sig), name, sig)
}

// A postStart exec hook runs in the container right after it starts: what it
// writes, the container sees; until it is done, the container has not
// started.
func TestPostStartExec(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := hostDir(t, d, "s")
	d.WriteManifest("hooked.yaml", podWithDir("hooked", dir,
		"until [ -f /tmp/hooked ]; do sleep 0.1; done; cat /tmp/hooked > /s/seen; "+forever("stop", "TERM"),
		"terminationGracePeriodSeconds: 5")+`    lifecycle:
      postStart:
        exec: {command: ["sh", "-c", "sleep 2; echo from the hook > /tmp/hooked"]}
`)
	d.Start()
	d.Eventually(30*time.Second, "the container runs, not started yet", func() error {
		p := d.Pod("hooked")
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("no pod yet")
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.State.Running == nil || cs.Started == nil || *cs.Started || cs.Ready {
			return fmt.Errorf("container %+v", cs)
		}
		return nil
	})
	waitFile(d, filepath.Join(dir, "seen"), "from the hook\n", 30*time.Second)
	d.Eventually(10*time.Second, "the container started once its hook is done", func() error {
		cs := d.Pod("hooked").Status.ContainerStatuses[0]
		if cs.Started == nil || !*cs.Started || !cs.Ready || cs.RestartCount != 0 {
			return fmt.Errorf("container %+v", cs)
		}
		return nil
	})
}

// A failing postStart hook kills the container, which restarts with the
// crash-loop back-off; the daemon's log says why, with the hook's error.
func TestPostStartFailure(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := hostDir(t, d, "s")
	d.WriteManifest("broken.yaml", podWithDir("broken", dir, "echo run >> /s/runs; "+forever("stop", "TERM"),
		"terminationGracePeriodSeconds: 5")+`    lifecycle:
      postStart:
        exec: {command: ["sh", "-c", "until [ -f /tmp/trapped ]; do sleep 0.1; done; echo broken hook >&2; exit 3"]}
`)
	d.Start()
	d.Eventually(60*time.Second, "killed twice, then in back-off", func() error {
		p := d.Pod("broken")
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return fmt.Errorf("no pod yet")
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.RestartCount < 1 || cs.State.Waiting == nil || cs.State.Waiting.Reason != "CrashLoopBackOff" {
			return fmt.Errorf("container %+v", cs)
		}
		if last := cs.LastTerminationState.Terminated; last == nil || last.ExitCode != 0 {
			return fmt.Errorf("last state %+v, want the exit of its stop signal's trap", cs.LastTerminationState)
		}
		return nil
	})
	if got := readFile(filepath.Join(dir, "stop")); got != "term\n" {
		t.Errorf("the container got %q, want a graceful stop (term)", got)
	}
	for _, want := range []string{`msg="postStart hook failed, killing container"`, "reason=FailedPostStartHook container=main",
		`exited with 3: broken hook`} {
		d.WaitLine(10*time.Second, want)
	}
}

// A daemon killed during a postStart hook: the next one kills what is left
// of the hook, and runs it again; the container has started only then, and it
// was never restarted.
func TestPostStartAcrossDaemonRestart(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := hostDir(t, d, "s")
	d.WriteManifest("slow.yaml", podWithDir("slow", dir, forever("stop", "TERM"), "terminationGracePeriodSeconds: 5")+`    lifecycle:
      postStart:
        exec: {command: ["sh", "-c", "echo began >> /s/hook; sleep 5; echo done >> /s/hook"]}
`)
	d.Start()
	waitFile(d, filepath.Join(dir, "hook"), "began\n", 30*time.Second)
	d.Kill9()
	d.Start()
	// Listed once the new daemon has read its manifests (a moment after it
	// answers /healthz, as the kubelet's pods are); the hook runs again for
	// 5s from then.
	var cs v1.ContainerStatus
	d.Eventually(10*time.Second, "the pod listed again", func() error {
		p := d.Pod("slow")
		if p == nil || len(p.Status.ContainerStatuses) == 0 {
			return errors.New("not listed")
		}
		cs = p.Status.ContainerStatuses[0]
		return nil
	})
	if cs.Started == nil || *cs.Started {
		t.Errorf("right after the restart: %+v, want not started while the hook runs again", cs)
	}
	waitFile(d, filepath.Join(dir, "hook"), "began\nbegan\ndone\n", 30*time.Second)
	d.Eventually(10*time.Second, "started", func() error {
		cs := d.Pod("slow").Status.ContainerStatuses[0]
		if cs.Started == nil || !*cs.Started || cs.RestartCount != 0 {
			return fmt.Errorf("container %+v", cs)
		}
		return nil
	})
}

// preStop hooks run before the stop signal, and their time comes out of the
// grace period: with 10s of grace, a container whose hook takes 6s and that
// ignores SIGTERM is killed 10s after the stop began, not 16s.
func TestPreStopExec(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := hostDir(t, d, "s")
	d.WriteManifest("stopping.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: stopping}
spec:
  terminationGracePeriodSeconds: 10
  volumes:
  - {name: s, hostPath: {path: %s}}
  containers:
  - name: orderly
    image: busybox
    command: ["sh", "-c", "trap 'echo term >> /s/orderly; exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    volumeMounts: [{name: s, mountPath: /s}]
    lifecycle:
      preStop:
        exec: {command: ["sh", "-c", "sleep 2; echo pre >> /s/orderly"]}
  - name: stubborn
    image: busybox
    command: ["sh", "-c", "trap '' TERM; while true; do sleep 1; done"]
    volumeMounts: [{name: s, mountPath: /s}]
    lifecycle:
      preStop:
        exec: {command: ["sh", "-c", "sleep 6"]}
`, dir))
	d.Start()
	p := d.WaitRunning("stopping", 30*time.Second)
	waitTrapped(d, p, "orderly")
	stubborn := containerPID(d, p, "stubborn")
	t0 := time.Now()
	d.RemoveManifest("stopping.yaml")
	waitFile(d, filepath.Join(dir, "orderly"), "pre\nterm\n", 30*time.Second)
	if took := time.Since(t0); took < 2*time.Second {
		t.Errorf("orderly stopped %v after the removal, before its 2s preStop", took)
	}
	d.Eventually(30*time.Second, "stubborn killed", func() error {
		if procAlive(stubborn) {
			return errStill
		}
		return nil
	})
	if took := time.Since(t0); took < 9500*time.Millisecond || took > 14*time.Second {
		t.Errorf("stubborn killed %v after the removal, want its 10s of grace, hook included", took)
	}
}

// A preStop httpGet hook reaches its server at the pod's address (here a
// hostNetwork pod's: the host's), and its status code does not matter.
func TestPreStopHTTPGet(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Method+" "+r.URL.String()+" "+r.UserAgent()+" "+r.Header.Get("X-Drain"))
		mu.Unlock()
		http.Error(w, "no", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	d := newDaemon(t)
	dir := hostDir(t, d, "s")
	d.WriteManifest("web.yaml", podWithDir("web", dir, forever("stop", "TERM"),
		fmt.Sprintf("hostNetwork: true\nterminationGracePeriodSeconds: 5"))+fmt.Sprintf(`    ports: [{name: admin, containerPort: %d}]
    lifecycle:
      preStop:
        httpGet: {path: "/drain?now=1", port: admin, httpHeaders: [{name: X-Drain, value: "yes"}]}
`, port))
	d.Start()
	waitTrapped(d, d.WaitRunning("web", 30*time.Second), "main")
	d.RemoveManifest("web.yaml")
	waitFile(d, filepath.Join(dir, "stop"), "term\n", 30*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"GET /drain?now=1 kube-lifecycle/1.37 yes"}; !slices.Equal(got, want) {
		t.Errorf("the server got %q, want %q", got, want)
	}
	// A failed hook is logged before the container is stopped: once its
	// exit is logged, the log says whether the hook failed.
	d.WaitLine(30*time.Second, `msg="container exited" pod=default/web-`+d.Name+" container=main")
	if out := d.Output(); strings.Contains(out, "FailedPreStopHook") {
		t.Errorf("a 503 made the hook fail:\n%s", out)
	}
}

// lifecycle.stopSignal replaces SIGTERM.
func TestStopSignal(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := hostDir(t, d, "s")
	d.WriteManifest("usr1.yaml", podWithDir("usr1", dir, forever("stop", "USR1"),
		"os: {name: linux}\nterminationGracePeriodSeconds: 5")+`    lifecycle: {stopSignal: SIGUSR1}
`)
	d.Start()
	p := d.WaitRunning("usr1", 30*time.Second)
	if s := p.Status.ContainerStatuses[0].StopSignal; s == nil || *s != v1.SIGUSR1 {
		t.Errorf("status stopSignal %v, want SIGUSR1", s)
	}
	waitCatches(d, p, "main", syscall.SIGUSR1)
	d.RemoveManifest("usr1.yaml")
	waitFile(d, filepath.Join(dir, "stop"), "usr1\n", 30*time.Second)
}

// An image's StopSignal replaces SIGTERM, for a container adopted by a new
// daemon too; lifecycle.stopSignal wins over it.
func TestImageStopSignal(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	tar := filepath.Join(d.Dir, "stopper.tar")
	testdaemon.BuildImage(t, tar, "-ref", "example.com/stopper:v1", "-stop-signal", "SIGUSR2")
	d.CLI("images", "import", tar)
	dir := hostDir(t, d, "s")
	pod := func(name, script, extra, ctrExtra string) string {
		return strings.Replace(podWithDir(name, dir, script, extra), "image: busybox", "image: example.com/stopper:v1", 1) + ctrExtra
	}
	d.WriteManifest("image.yaml", pod("image", forever("image", "USR2"), "terminationGracePeriodSeconds: 5", ""))
	d.WriteManifest("own.yaml", pod("own", forever("own", "QUIT"), "os: {name: linux}\nterminationGracePeriodSeconds: 5",
		"    lifecycle: {stopSignal: SIGQUIT}\n"))
	d.Start()
	for name, want := range map[string]v1.Signal{"image": v1.SIGUSR2, "own": v1.SIGQUIT} {
		p := d.WaitRunning(name, 30*time.Second)
		if s := p.Status.ContainerStatuses[0].StopSignal; s == nil || *s != want {
			t.Errorf("pod %s: status stopSignal %v, want %s", name, s, want)
		}
		sig := map[v1.Signal]syscall.Signal{v1.SIGUSR2: syscall.SIGUSR2, v1.SIGQUIT: syscall.SIGQUIT}[want]
		waitCatches(d, p, "main", sig)
	}
	d.Kill9()
	d.Start()
	d.RemoveManifest("image.yaml")
	d.RemoveManifest("own.yaml")
	waitFile(d, filepath.Join(dir, "image"), "usr2\n", 30*time.Second)
	waitFile(d, filepath.Join(dir, "own"), "quit\n", 30*time.Second)
}

// A container's termination message is what it wrote to its
// terminationMessagePath (any user may), else with FallbackToLogsOnError the
// end of its log if it failed.
func TestTerminationMessage(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("ends.yaml", `apiVersion: v1
kind: Pod
metadata: {name: ends}
spec:
  restartPolicy: Never
  containers:
  - name: file
    image: busybox
    command: ["sh", "-c", "echo -n all done > /dev/termination-log; exit 1"]
  - name: custom
    image: busybox
    securityContext: {runAsUser: 65534}
    terminationMessagePath: /tmp/why
    command: ["sh", "-c", "echo -n nobody wrote this > /tmp/why"]
  - name: logs
    image: busybox
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["sh", "-c", "echo starting; echo cannot go on; exit 2"]
  - name: logs-ok
    image: busybox
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["sh", "-c", "echo fine"]
`)
	d.Start()
	want := map[string]string{"file": "all done", "custom": "nobody wrote this", "logs": "starting\ncannot go on\n", "logs-ok": ""}
	d.Eventually(30*time.Second, "every container terminated with its message", func() error {
		p := d.Pod("ends")
		if p == nil || len(p.Status.ContainerStatuses) != 4 {
			return fmt.Errorf("no pod yet")
		}
		for _, cs := range p.Status.ContainerStatuses {
			term := cs.State.Terminated
			if term == nil {
				return fmt.Errorf("%s: %+v", cs.Name, cs.State)
			}
			if term.Message != want[cs.Name] {
				return fmt.Errorf("%s: message %q, want %q", cs.Name, term.Message, want[cs.Name])
			}
		}
		return nil
	})
}

// A container that swaps its termination log for a symlink to a host file
// (it may unmount it when privileged) does not get that file into its
// status: the daemon reads the file it made, never the path the container
// chose.
func TestTerminationMessageSymlinkToHostFile(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	secret := filepath.Join(d.Dir, "secret")
	if err := os.WriteFile(secret, []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	swap := "umount /dev/termination-log && rm /dev/termination-log && ln -s " + secret + " /dev/termination-log && " +
		"ln -s /dev/termination-log /tmp/l && echo swapped"
	d.WriteManifest("swap.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: swap}
spec:
  restartPolicy: Never
  containers:
  - name: file
    image: busybox
    securityContext: {privileged: true}
    command: ["sh", "-c", %q]
  - name: logs
    image: busybox
    securityContext: {privileged: true}
    terminationMessagePolicy: FallbackToLogsOnError
    command: ["sh", "-c", %q]
`, swap+"; exit 1", swap+"; exit 1"))
	d.Start()
	d.Eventually(30*time.Second, "both terminated", func() error {
		p := d.Pod("swap")
		if p == nil || len(p.Status.ContainerStatuses) != 2 {
			return fmt.Errorf("no pod yet")
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.State.Terminated == nil {
				return fmt.Errorf("%s: %+v", cs.Name, cs.State)
			}
		}
		return nil
	})
	for _, cs := range d.Pod("swap").Status.ContainerStatuses {
		msg := cs.State.Terminated.Message
		want := "" // the file the daemon made stayed empty
		if cs.Name == "logs" {
			want = "swapped\n" // and the log stands in for it
		}
		if strings.Contains(msg, "secret") || msg != want {
			t.Errorf("%s: message %q, want %q", cs.Name, msg, want)
		}
	}
}

// activeDeadlineSeconds: the pod fails with DeadlineExceeded once it has been
// active that long; its container is stopped gracefully and never restarted.
func TestActiveDeadlineSeconds(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := hostDir(t, d, "s")
	d.WriteManifest("job.yaml", podWithDir("job", dir, forever("stop", "TERM"),
		"activeDeadlineSeconds: 4\nterminationGracePeriodSeconds: 5"))
	d.Start()
	p := d.WaitRunning("job", 30*time.Second)
	waitTrapped(d, p, "main")
	started := p.Status.StartTime.Time
	d.Eventually(30*time.Second, "the pod failed", func() error {
		p = d.Pod("job")
		if p.Status.Phase != v1.PodFailed {
			return fmt.Errorf("phase %s", p.Status.Phase)
		}
		return nil
	})
	if p.Status.Reason != "DeadlineExceeded" || p.Status.Message != "Pod was active on the node longer than the specified deadline" {
		t.Errorf("reason %q message %q", p.Status.Reason, p.Status.Message)
	}
	if took := time.Since(started); took < 4*time.Second {
		t.Errorf("failed %v after its startTime, before its deadline", took)
	}
	waitFile(d, filepath.Join(dir, "stop"), "term\n", 10*time.Second)
	d.Eventually(10*time.Second, "the container terminated", func() error {
		cs := d.Pod("job").Status.ContainerStatuses[0]
		if cs.State.Terminated == nil || cs.RestartCount != 0 {
			return fmt.Errorf("container %+v, want terminated, never restarted", cs)
		}
		return nil
	})
	// Once the pod is gone, every sync that could have restarted it is
	// done: the daemon's log says how many starts there were.
	d.RemoveManifest("job.yaml")
	d.Eventually(30*time.Second, "the pod is gone", func() error {
		if d.Pod("job") != nil {
			return errStill
		}
		return nil
	})
	out := d.WaitOutput(10*time.Second, "the start logged", func(out string) bool {
		return strings.Contains(out, `msg="container started"`)
	})
	if n := strings.Count(out, `msg="container started"`); n != 1 {
		t.Errorf("%d container starts, want 1: restarted after its deadline\n%s", n, out)
	}
}

// Many pods with a postStart exec hook started at once: each hook runs, none
// is refused because its container's init was still in its execve (runc's
// init is multi-threaded, and while the kernel ends its other threads the
// process shows as a zombie that libcontainer takes for a dead container).
// Under load this refused a hook or two in every fifteen, and the container
// was killed and restarted.
func TestPostStartExecOfManyPodsAtOnce(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.Start()
	const pods = 15
	for i := range pods {
		d.WriteManifest(fmt.Sprintf("hooked%d.yaml", i), fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: hooked%d}
spec:
  terminationGracePeriodSeconds: 1
  containers:
  - name: main
    image: busybox:latest
    command: [sleep, "3600"]
    lifecycle:
      postStart:
        exec: {command: [sh, -c, "echo started > /tmp/started"]}
`, i))
	}
	d.Eventually(90*time.Second, "every hooked pod Ready", func() error {
		for i := range pods {
			p := d.Pod(fmt.Sprintf("hooked%d", i))
			if p == nil || len(p.Status.ContainerStatuses) == 0 {
				return fmt.Errorf("hooked%d not listed", i)
			}
			if cs := p.Status.ContainerStatuses[0]; cs.RestartCount > 0 || cs.LastTerminationState.Terminated != nil {
				t.Fatalf("hooked%d restarted: its hook failed? last state %+v\n%s", i, cs.LastTerminationState.Terminated, d.Output())
			} else if !cs.Ready {
				return fmt.Errorf("hooked%d not ready: %+v", i, cs.State)
			}
		}
		return nil
	})
	if out := d.Output(); strings.Contains(out, "postStart hook failed") {
		t.Errorf("a postStart hook failed:\n%s", out)
	}
}
