package tests

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// notifySocket is a stand-in for systemd's notification socket.
type notifySocket struct {
	conn *net.UnixConn
	msgs chan string
}

func newNotifySocket(t *testing.T) (*notifySocket, string) {
	path := filepath.Join(t.TempDir(), "notify.sock")
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	s := &notifySocket{conn: conn, msgs: make(chan string, 1000)}
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				close(s.msgs)
				return
			}
			s.msgs <- string(buf[:n])
		}
	}()
	t.Cleanup(func() { conn.Close() })
	return s, path
}

// next returns the next message that contains want, failing after timeout.
func (s *notifySocket) next(t *testing.T, want string, timeout time.Duration) string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case m, ok := <-s.msgs:
			if !ok {
				t.Fatalf("notify socket closed before %q", want)
			}
			if strings.Contains(m, want) {
				return m
			}
		case <-deadline:
			t.Fatalf("no %q from the daemon within %s", want, timeout)
		}
	}
}

// Under systemd (Type=notify) the daemon says READY=1 only once its pods were
// started, keeps STATUS current, pings the watchdog, and says STOPPING=1.
func TestSystemdNotify(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	sock, path := newNotifySocket(t)
	d.Env = []string{"NOTIFY_SOCKET=" + path, "WATCHDOG_USEC=2000000"}
	d.WriteManifest("a.yaml", sleeper("a", ""))
	d.WriteManifest("b.yaml", sleeper("b", ""))
	d.Start()

	ready := sock.next(t, "READY=1", 30*time.Second)
	// By READY=1 both pods are running: After=staticpodd.service means they are up.
	for _, name := range []string{"a", "b"} {
		p := d.Pod(name)
		if p == nil || len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
			t.Errorf("at READY=1 pod %s is not running: %+v", name, p)
		}
	}
	if !strings.Contains(ready, "STATUS=2 pods: 2 running") {
		t.Errorf("READY=1 message %q does not say both pods run", ready)
	}
	// The watchdog is pinged at half of WATCHDOG_USEC, as sd_watchdog_enabled(3)
	// advises: 1s here, never near the 2s after which systemd would kill us.
	sock.next(t, "WATCHDOG=1", 3*time.Second)
	last := time.Now()
	for range 4 {
		sock.next(t, "WATCHDOG=1", 3*time.Second)
		if gap := time.Since(last); gap > 1500*time.Millisecond {
			t.Errorf("watchdog pings %s apart, want about 1s (WATCHDOG_USEC=2s)", gap.Round(time.Millisecond))
		}
		last = time.Now()
	}
	d.RemoveManifest("b.yaml")
	sock.next(t, "STATUS=1 pod: 1 running", 20*time.Second)

	// systemctl reload (SIGHUP): RELOADING=1, manifests read again, READY=1;
	// the daemon goes on.
	d.Signal(syscall.SIGHUP)
	sock.next(t, "RELOADING=1", 10*time.Second)
	if m := sock.next(t, "READY=1", 10*time.Second); !strings.Contains(m, "STATUS=1 pod: 1 running") {
		t.Errorf("READY=1 after reload %q does not give the pods' status back", m)
	}
	if !d.Running() {
		t.Fatal("the daemon exited on SIGHUP")
	}

	// systemctl stop: STOPPING=1, and the pods stay (KillMode=process).
	pid := containerPID(d, d.Pod("a"), "main")
	d.Signal(syscall.SIGTERM)
	sock.next(t, "STOPPING=1", 10*time.Second)
	<-d.Exited()
	if !procAlive(pid) {
		t.Errorf("container %d stopped with the daemon", pid)
	}
}

// With --ready-when=pods-ready:NAME, READY=1 waits until that pod is Ready:
// meanwhile STATUS= says so and the start timeout is extended; the readiness
// comes from the container (a file it is shown), not from a delay.
func TestSystemdReadyWhenPodsReady(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	sock, path := newNotifySocket(t)
	d.Env = []string{"NOTIFY_SOCKET=" + path}
	d.Args = []string{"--ready-when=pods-ready:gate"}
	dir := t.TempDir()
	d.WriteManifest("gate.yaml", podWithDir("gate", dir, "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done", "terminationGracePeriodSeconds: 3")+
		"    readinessProbe:\n      exec: {command: [cat, /s/ready]}\n      periodSeconds: 1\n")
	d.WriteManifest("other.yaml", sleeper("other", ""))
	d.Start()

	// Until the pod is Ready: no READY=1, a STATUS= that says why, and extensions.
	var waiting, extended bool
	deadline := time.After(60 * time.Second)
	for !waiting || !extended {
		select {
		case m := <-sock.msgs:
			if strings.Contains(m, "READY=1") {
				t.Fatalf("READY=1 before the gate pod is ready: %q", m)
			}
			if strings.Contains(m, "STATUS=waiting for pods-ready: pod gate-") {
				waiting = true
			}
			if strings.Contains(m, "EXTEND_TIMEOUT_USEC=60000000") {
				extended = true
			}
		case <-deadline:
			t.Fatalf("within 60s: waiting status %v, extension %v", waiting, extended)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "ready"), []byte("yes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ready := sock.next(t, "READY=1", 60*time.Second)
	if strings.Contains(ready, "waiting for") {
		t.Errorf("READY=1 still says it waits: %q", ready)
	}
	p := d.Pod("gate")
	if p == nil || len(p.Status.ContainerStatuses) != 1 || !p.Status.ContainerStatuses[0].Ready {
		t.Errorf("at READY=1 the gate pod is not Ready: %+v", p)
	}
}

// A daemon stopped before READY=1 with --ready-when (systemd's start timeout
// ran out) says in its last STATUS= which pod never became Ready: it is what
// `systemctl status` shows of the failed start. The pods keep running.
func TestSystemdStoppedBeforeReadySaysWhy(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	sock, path := newNotifySocket(t)
	d.Env = []string{"NOTIFY_SOCKET=" + path}
	d.Args = []string{"--ready-when=pods-ready:never"}
	d.WriteManifest("never.yaml", sleeper("never", "    readinessProbe:\n      exec: {command: [\"false\"]}\n      periodSeconds: 1\n"))
	d.Start()
	sock.next(t, "STATUS=waiting for pods-ready: pod never-", 60*time.Second)
	pid := containerPID(d, d.WaitRunning("never", 30*time.Second), "main")
	d.Signal(syscall.SIGTERM)
	if m := sock.next(t, "STOPPING=1", 10*time.Second); !strings.Contains(m, "STATUS=Stopping: never ready: waiting for pods-ready: pod never-") {
		t.Errorf("STOPPING=1 message %q does not say which pod never became Ready", m)
	}
	<-d.Exited()
	if !procAlive(pid) {
		t.Errorf("container %d stopped with the daemon", pid)
	}
}
