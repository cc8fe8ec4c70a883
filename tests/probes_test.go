package tests

import (
	"fmt"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// switchable answers 200 or 500 on a path, as the test says.
type switchable struct{ ok atomic.Bool }

func (s *switchable) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.ok.Load() {
		fmt.Fprint(w, "ok")
		return
	}
	http.Error(w, "not ok", http.StatusInternalServerError)
}

func ready(p *v1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			return c.Status == v1.ConditionTrue
		}
	}
	return false
}

// The shape of kubeadm's kube-apiserver manifest: hostNetwork, HTTPS probes
// on a named port with host set, startup, liveness and readiness. The
// server the probes reach is the test's own, so it can fail on cue.
func TestProbesKubeadmShape(t *testing.T) {
	t.Parallel()
	var livez, readyz switchable
	livez.ok.Store(true)
	readyz.ok.Store(true)
	mux := http.NewServeMux()
	mux.Handle("/livez", &livez)
	mux.Handle("/readyz", &readyz)
	srv := httptest.NewTLSServer(mux)
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port

	d := newDaemon(t)
	d.WriteManifest("apiserver.yaml", fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: kube-apiserver
  namespace: kube-system
  labels: {component: kube-apiserver, tier: control-plane}
spec:
  hostNetwork: true
  priorityClassName: system-node-critical
  terminationGracePeriodSeconds: 2
  containers:
  - name: kube-apiserver
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    ports:
    - {name: probe-port, containerPort: %d, protocol: TCP}
    startupProbe:
      httpGet: {host: 127.0.0.1, path: /livez, port: probe-port, scheme: HTTPS}
      initialDelaySeconds: 1
      periodSeconds: 1
      timeoutSeconds: 15
      failureThreshold: 24
    livenessProbe:
      httpGet: {host: 127.0.0.1, path: /livez, port: probe-port, scheme: HTTPS}
      periodSeconds: 1
      timeoutSeconds: 15
      failureThreshold: 2
    readinessProbe:
      httpGet: {host: 127.0.0.1, path: /readyz, port: probe-port, scheme: HTTPS}
      periodSeconds: 1
      timeoutSeconds: 15
      failureThreshold: 2
`, port))
	d.Start()
	name := "kube-apiserver"
	waitReady := func(want bool, what string) *v1.Pod {
		var p *v1.Pod
		d.Eventually(30*time.Second, what, func() error {
			if p = d.Pod(name); p == nil || ready(p) != want {
				return fmt.Errorf("not yet")
			}
			return nil
		})
		return p
	}
	p := waitReady(true, "the pod is Ready")
	if cs := p.Status.ContainerStatuses[0]; !cs.Ready || !*cs.Started || cs.RestartCount != 0 {
		t.Fatalf("container %+v", cs)
	}

	readyz.ok.Store(false)
	p = waitReady(false, "the pod goes unready when /readyz fails")
	if cs := p.Status.ContainerStatuses[0]; cs.State.Running == nil || cs.RestartCount != 0 {
		t.Errorf("readiness restarted the container: %+v", cs)
	}
	readyz.ok.Store(true)
	waitReady(true, "the pod is Ready again")

	livez.ok.Store(false)
	d.Eventually(30*time.Second, "liveness restarts the container", func() error {
		p := d.Pod(name)
		if p == nil || p.Status.ContainerStatuses[0].RestartCount < 1 {
			return fmt.Errorf("not restarted")
		}
		return nil
	})
	livez.ok.Store(true)
	p = waitReady(true, "the restarted container is Ready")
	cs := p.Status.ContainerStatuses[0]
	if last := cs.LastTerminationState.Terminated; cs.RestartCount != 1 || last == nil {
		t.Errorf("after the liveness restart: %+v", cs)
	}
	// The daemon log says why it restarted.
	d.WaitOutput(10*time.Second, "the liveness failure logged", func(out string) bool {
		return containsAll(out, "probe result changed", "Container kube-apiserver failed liveness probe, will be restarted")
	})
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// A pod with its own network namespace is probed from inside it: busybox
// httpd listens on 127.0.0.1 of the pod, which the host cannot reach, and
// the image has no curl or nc for the probes to need.
func TestProbesInsidePodNetwork(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	dir := filepath.Join(d.Dir, "www")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	port := testdaemon.FreePort(t) // free on the host: only the pod listens there
	d.WriteManifest("web.yaml", podWithDir("web", dir,
		fmt.Sprintf("trap 'exit 0' TERM; httpd -p 127.0.0.1:%d -h /s; while true; do sleep 1 & wait $!; done", port),
		fmt.Sprintf(`terminationGracePeriodSeconds: 2`))+fmt.Sprintf(`    ports: [{name: http, containerPort: %d}]
    readinessProbe:
      httpGet: {path: /ready, port: http}
      periodSeconds: 1
    livenessProbe:
      tcpSocket: {port: %d}
      periodSeconds: 1
`, port, port))
	d.Start()
	p := d.WaitRunning("web", 30*time.Second)
	if ready(p) {
		t.Fatalf("ready before /ready exists: %+v", p.Status)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
		c.Close()
		t.Errorf("the host reaches the pod's port %d: the probes prove nothing", port)
	}
	if err := os.WriteFile(filepath.Join(dir, "ready"), []byte("ok"), 0o644); err != nil {
		t.Fatal(err)
	}
	d.Eventually(30*time.Second, "ready once /ready is served inside the pod", func() error {
		if p := d.Pod("web"); p == nil || !ready(p) {
			return fmt.Errorf("not ready")
		}
		return nil
	})
	if p := d.Pod("web"); p.Status.ContainerStatuses[0].RestartCount != 0 {
		t.Errorf("the tcp liveness probe inside the pod restarted it: %+v", p.Status.ContainerStatuses[0])
	}
}

// Exec probes run in the container: readiness follows a file the test
// makes and removes with `staticpodd exec`, liveness restarts the container
// when another appears, and a probe that outlives timeoutSeconds fails
// with the kubelet's message and leaves no process behind.
func TestExecProbes(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("ex.yaml", `apiVersion: v1
kind: Pod
metadata: {name: ex}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; touch /tmp/ready; while true; do sleep 1 & wait $!; done"]
    readinessProbe:
      exec: {command: ["cat", "/tmp/ready"]}
      periodSeconds: 1
      failureThreshold: 1
    livenessProbe:
      exec: {command: ["sh", "-c", "test ! -e /tmp/die"]}
      periodSeconds: 1
      failureThreshold: 1
  - name: slow
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    readinessProbe:
      exec: {command: ["sleep", "30"]}
      timeoutSeconds: 1
      periodSeconds: 2
`)
	d.Start()
	isReady := func(name string) func() error {
		return func() error {
			p := d.Pod("ex")
			if p == nil {
				return fmt.Errorf("ex not listed yet")
			}
			for _, cs := range p.Status.ContainerStatuses {
				if cs.Name == name && cs.Ready {
					return nil
				}
			}
			return fmt.Errorf("%s not ready", name)
		}
	}
	d.Eventually(30*time.Second, "main ready once /tmp/ready is there", isReady("main"))
	d.CLI("exec", "ex", "-c", "main", "--", "rm", "/tmp/ready")
	d.Eventually(30*time.Second, "main unready without /tmp/ready", func() error {
		if isReady("main")() == nil {
			return errStill
		}
		return nil
	})
	d.CLI("exec", "ex", "-c", "main", "--", "touch", "/tmp/ready")
	d.Eventually(30*time.Second, "main ready again", isReady("main"))

	d.CLI("exec", "ex", "-c", "main", "--", "touch", "/tmp/die")
	d.Eventually(30*time.Second, "liveness restarts main", func() error {
		for _, cs := range d.Pod("ex").Status.ContainerStatuses {
			if cs.Name == "main" && cs.RestartCount == 1 && cs.State.Running != nil {
				return nil
			}
		}
		return fmt.Errorf("not restarted yet")
	})

	d.Eventually(30*time.Second, "the slow probe fails with its timeout", func() error {
		if out := d.CLI("ps", "-o", "wide"); !strings.Contains(out, "slow readiness probe") || !strings.Contains(out, "command timed out after 1s") {
			return fmt.Errorf("ps -o wide:\n%s", out)
		}
		return nil
	})
	// A timed-out probe is killed: no `sleep 30` piles up in the container.
	p := d.Pod("ex")
	var id string
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "slow" {
			id = strings.TrimPrefix(cs.ContainerID, "staticpodd://")
		}
	}
	if n := countProcs(t, d, id, "sleep 30"); n > 1 {
		t.Errorf("%d timed-out probe processes still run in the container", n)
	}
}

// countProcs counts the processes of container id whose command line is cmd.
func countProcs(t *testing.T, d *daemon, id, cmd string) int {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/pids", d.Cgroup, "*", id, "cgroup.procs"))
	n := 0
	for _, m := range matches {
		b, _ := os.ReadFile(m)
		for _, pid := range strings.Fields(string(b)) {
			c, _ := os.ReadFile("/proc/" + pid + "/cmdline")
			if strings.ReplaceAll(strings.TrimRight(string(c), "\x00"), "\x00", " ") == cmd {
				n++
			}
		}
	}
	return n
}

// A daemon restart leaves a Ready pod Ready: what its probes said is kept
// for the next daemon (the kubelet keeps it across its restarts too), and the
// probes go on from there instead of starting over.
func TestProbeResultsSurviveDaemonRestart(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	// Long periods: after a restart the first probes wait up to a period
	// (the kubelet's jitter), so a pod whose results were lost would be
	// unready for seconds.
	d.WriteManifest("kept.yaml", `apiVersion: v1
kind: Pod
metadata: {name: kept}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; touch /tmp/ready; while true; do sleep 1 & wait $!; done"]
    startupProbe:
      exec: {command: ["cat", "/tmp/ready"]}
      periodSeconds: 10
    readinessProbe:
      exec: {command: ["cat", "/tmp/ready"]}
      periodSeconds: 10
      failureThreshold: 1
`)
	d.Start()
	var before *v1.Pod
	d.Eventually(30*time.Second, "kept Ready", func() error {
		if p := d.Pod("kept"); p != nil && ready(p) {
			before = p
			return nil
		}
		return errStill
	})
	id := before.Status.ContainerStatuses[0].ContainerID

	d.Kill9()
	d.Start()
	// Every look from the new daemon's first answer on, for 3 s: Ready, the
	// same container.
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(50 * time.Millisecond) {
		p := d.Pod("kept")
		if p == nil || len(p.Status.ContainerStatuses) != 1 {
			t.Fatalf("kept not listed after the restart: %+v", p)
		}
		cs := p.Status.ContainerStatuses[0]
		if cs.ContainerID != id {
			t.Fatalf("container %s replaced by %s across the daemon's restart", id, cs.ContainerID)
		}
		if !ready(p) || !cs.Ready || cs.Started == nil || !*cs.Started {
			t.Fatalf("kept not Ready right after the daemon's restart: ready %v, container ready %v, started %v",
				ready(p), cs.Ready, cs.Started)
		}
	}
	// The probes still count: a readiness failure makes it unready.
	d.CLI("exec", "kept", "--", "rm", "/tmp/ready")
	d.Eventually(30*time.Second, "kept unready once its readiness probe fails", func() error {
		if p := d.Pod("kept"); p != nil && !ready(p) {
			return nil
		}
		return errStill
	})
}

// An exec probe naming a command the image does not have errs, as under the
// kubelet with containerd (whose ExecSync fails to start such an exec): it
// is thrown away, so a liveness probe with failureThreshold 1 never restarts
// the container, and one Unhealthy event says it errored.
func TestProbeOfAMissingCommandRestartsNothing(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("miss.yaml", `apiVersion: v1
kind: Pod
metadata: {name: miss}
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
    livenessProbe:
      exec: {command: ["/nope"]}
      periodSeconds: 1
      failureThreshold: 1
    readinessProbe:
      exec: {command: ["sh", "-c", "echo x >> /tmp/probed"]}
      periodSeconds: 1
`)
	d.Start()
	// Each line is a period of probing of this container instance (a
	// restarted container starts over with no file).
	d.Eventually(60*time.Second, "five periods of probes", func() error {
		p := d.Pod("miss")
		if p == nil || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
			return fmt.Errorf("miss not running yet")
		}
		if n := strings.Count(d.CLI("exec", "miss", "-c", "main", "--", "sh", "-c", "cat /tmp/probed 2>/dev/null; true"), "x"); n < 5 {
			return fmt.Errorf("%d periods", n)
		}
		return nil
	})
	if cs := d.Pod("miss").Status.ContainerStatuses[0]; cs.RestartCount != 0 {
		t.Errorf("main restarted %d times for a probe that could not be made", cs.RestartCount)
	}
	ev := d.CLI("events")
	if n := strings.Count(ev, "Liveness probe errored and resulted in unknown state: "); n != 1 ||
		!strings.Contains(ev, "command not found") || strings.Contains(ev, "Liveness probe failed") {
		t.Errorf("events, want one Unhealthy saying the liveness probe errored:\n%s", ev)
	}
}
