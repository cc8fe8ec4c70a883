package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testroot"
)

// bin and imageTar are the binary under test and the busybox image tarball; make
// test passes them, a bare `go test` builds them.
var (
	bin      string
	imageTar string
)

func TestMain(m *testing.M) {
	code := func() int {
		if os.Geteuid() != 0 {
			return m.Run() // root tests skip or fail themselves
		}
		dir, err := os.MkdirTemp("", "staticpodd-e2e-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		if bin = os.Getenv("STATICPODD_BIN"); bin == "" {
			bin = filepath.Join(dir, "staticpodd")
			if out, err := exec.Command("go", "build", "-o", bin, "../cmd/staticpodd").CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "build staticpodd: %v\n%s", err, out)
				return 1
			}
		}
		if imageTar = os.Getenv("STATICPODD_IMAGE"); imageTar == "" {
			imageTar = filepath.Join(dir, "busybox.tar")
			if out, err := exec.Command("go", "run", "../rootfs/mkimage", "-busybox", "/bin/busybox", "-ref", "busybox:latest", "-o", imageTar).CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "build image: %v\n%s", err, out)
				return 1
			}
		}
		return m.Run()
	}()
	os.Exit(code)
}

// daemon is one staticpodd under test, with every path of its own so that
// several can run side by side.
type daemon struct {
	t         *testing.T
	name      string // node name
	dir       string
	rootDir   string
	runDir    string
	manifests string
	logsDir   string
	cgroup    string // cgroupRoot
	config    string
	port      int // readOnlyPort
	// socketOnly: the config serves no read-only port; talk to the CLI socket.
	socketOnly bool
	env        []string // extra environment for the daemon
	// nofile, when set, is the open-file limit (soft and hard) the daemon
	// runs under, set with prlimit(1), which execs it in place.
	nofile int

	mu     sync.Mutex
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	exited chan struct{}
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func freePort(t *testing.T) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// newDaemon prepares a daemon (not started) with the image imported.
func newDaemon(t *testing.T) *daemon {
	t.Helper()
	testroot.Require(t)
	id := randHex(4)
	dir := t.TempDir()
	d := &daemon{
		t:         t,
		name:      "node-" + id,
		dir:       dir,
		rootDir:   filepath.Join(dir, "root"),
		runDir:    filepath.Join("/run", "staticpodd-test-"+id),
		manifests: filepath.Join(dir, "manifests"),
		logsDir:   filepath.Join(dir, "logs"),
		cgroup:    "/staticpodd-test-" + id,
		config:    filepath.Join(dir, "config.yaml"),
		port:      freePort(t),
	}
	for _, p := range []string{d.rootDir, d.manifests, d.logsDir} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
fileCheckFrequency: 2s
syncFrequency: 5s
address: 127.0.0.1
readOnlyPort: %d
podLogsDir: %s
cgroupRoot: %s
podPidsLimit: 100
`, d.manifests, d.port, d.logsDir, d.cgroup)
	if err := os.WriteFile(d.config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	d.cli("images", "import", imageTar)
	t.Cleanup(d.cleanup)
	return d
}

// cli runs a staticpodd subcommand against this daemon's dirs and returns stdout;
// it fails the test on a non-zero exit.
func (d *daemon) cli(args ...string) string {
	d.t.Helper()
	out, err := d.cliErr(args...)
	if err != nil {
		d.t.Fatalf("staticpodd %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (d *daemon) cliErr(args ...string) (string, error) {
	args = append(args, "--root-dir", d.rootDir, "--run-dir", d.runDir)
	cmd := exec.Command(bin, args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

func (d *daemon) start() {
	d.t.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	args := []string{bin, "run", "--config", d.config, "--hostname-override", d.name,
		"--root-dir", d.rootDir, "--run-dir", d.runDir}
	if d.nofile > 0 {
		args = append([]string{"prlimit", fmt.Sprintf("--nofile=%d", d.nofile), "--"}, args...)
	}
	cmd := exec.Command(args[0], args[1:]...)
	d.stderr = &bytes.Buffer{}
	cmd.Stdout = d.stderr
	cmd.Stderr = d.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), d.env...)
	if err := cmd.Start(); err != nil {
		d.t.Fatal(err)
	}
	d.cmd = cmd
	d.exited = make(chan struct{})
	go func(exited chan struct{}) { cmd.Wait(); close(exited) }(d.exited)
	d.eventually(10*time.Second, "the daemon answers /healthz", func() error {
		resp, err := d.client().Get(d.url("/healthz"))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	})
}

// kill9 kills the daemon the way a crash or OOM would: no chance to clean up.
func (d *daemon) kill9() {
	d.t.Helper()
	d.mu.Lock()
	cmd, exited := d.cmd, d.exited
	d.mu.Unlock()
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// stop sends SIGTERM and waits for the daemon to exit.
func (d *daemon) stop() {
	d.t.Helper()
	d.mu.Lock()
	cmd, exited := d.cmd, d.exited
	d.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-exited
		d.t.Error("daemon did not exit within 30s of SIGTERM")
	}
}

func (d *daemon) running() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return false
	}
	select {
	case <-d.exited:
		return false
	default:
		return true
	}
}

// cleanup removes every manifest so the daemon stops and removes every pod, then
// stops the daemon; whatever is left is a leak and fails the test.
func (d *daemon) cleanup() {
	entries, _ := os.ReadDir(d.manifests)
	for _, e := range entries {
		os.Remove(filepath.Join(d.manifests, e.Name()))
	}
	if !d.running() {
		d.start()
	}
	d.eventually(90*time.Second, "every pod is gone", func() error {
		if pods := d.pods(); len(pods) > 0 {
			return fmt.Errorf("%d pods left", len(pods))
		}
		// Pods the daemon found running but no manifest wants (removed while
		// it was down) are not listed while it removes them: wait for their
		// sandboxes to go too.
		if sbs, _ := os.ReadDir(filepath.Join(d.runDir, "pods")); len(sbs) > 0 {
			return fmt.Errorf("%d sandboxes left", len(sbs))
		}
		return nil
	})
	d.stop()
	if d.t.Failed() {
		d.t.Logf("daemon output:\n%s", d.output())
	}
	d.assertNoLeaks()
	os.RemoveAll(d.runDir)
}

func (d *daemon) output() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stderr == nil {
		return ""
	}
	return d.stderr.String()
}

func (d *daemon) url(path string) string {
	if d.socketOnly {
		return "http://staticpodd" + path
	}
	return fmt.Sprintf("http://127.0.0.1:%d%s", d.port, path)
}

// client talks to the read-only port, or to <run-dir>/staticpodd.sock.
func (d *daemon) client() *http.Client {
	if !d.socketOnly {
		return http.DefaultClient
	}
	sock := filepath.Join(d.runDir, "staticpodd.sock")
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dialer net.Dialer
			return dialer.DialContext(ctx, "unix", sock)
		},
	}}
}

var errStill = errors.New("still there")

// buildImage builds a busybox image tarball with extra mkimage flags.
func buildImage(t *testing.T, out string, args ...string) {
	t.Helper()
	args = append([]string{"run", "../rootfs/mkimage", "-busybox", "/bin/busybox", "-o", out}, args...)
	if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		t.Fatalf("build image: %v\n%s", err, b)
	}
}

// pods returns the pods the read-only port reports.
func (d *daemon) pods() []v1.Pod {
	d.t.Helper()
	resp, err := d.client().Get(d.url("/pods"))
	if err != nil {
		d.t.Fatalf("GET /pods: %v", err)
	}
	defer resp.Body.Close()
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		d.t.Fatalf("decode /pods: %v", err)
	}
	return list.Items
}

// pod returns the pod with the given manifest name, or nil.
func (d *daemon) pod(name string) *v1.Pod {
	full := name + "-" + d.name
	for _, p := range d.pods() {
		if p.Name == full {
			return &p
		}
	}
	return nil
}

// writeManifest puts a manifest into the watched directory atomically, the way
// tools should: write elsewhere, then rename(2).
func (d *daemon) writeManifest(file, content string) {
	d.t.Helper()
	tmp := filepath.Join(d.dir, "."+file+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		d.t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.manifests, file)); err != nil {
		d.t.Fatal(err)
	}
}

func (d *daemon) removeManifest(file string) {
	d.t.Helper()
	if err := os.Remove(filepath.Join(d.manifests, file)); err != nil {
		d.t.Fatal(err)
	}
}

// eventually polls f until it returns nil or the timeout passes.
func (d *daemon) eventually(timeout time.Duration, what string, f func() error) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var err error
	for {
		if err = f(); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			d.t.Fatalf("waited %s for %s: %v\ndaemon output:\n%s", timeout, what, err, d.output())
		case <-tick.C:
		}
	}
}

// waitRunning waits until every container of the pod is running and returns the pod.
func (d *daemon) waitRunning(name string, timeout time.Duration) *v1.Pod {
	d.t.Helper()
	var pod *v1.Pod
	d.eventually(timeout, name+" running", func() error {
		pod = d.pod(name)
		if pod == nil {
			return fmt.Errorf("no pod %s", name)
		}
		if pod.Status.Phase != v1.PodRunning {
			return fmt.Errorf("phase %q", pod.Status.Phase)
		}
		for _, cs := range pod.Status.ContainerStatuses {
			if cs.State.Running == nil {
				return fmt.Errorf("container %s not running: %+v", cs.Name, cs.State)
			}
		}
		return nil
	})
	return pod
}

// assertNoLeaks checks that nothing of this daemon's pods is left on the host:
// mounts under its dirs, cgroups under its cgroupRoot, state files.
func (d *daemon) assertNoLeaks() {
	d.t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		d.t.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if strings.HasPrefix(f[4], d.rootDir) || strings.HasPrefix(f[4], d.runDir) {
			d.t.Errorf("leaked mount: %s", f[4])
		}
	}
	ctrls, _ := os.ReadDir("/sys/fs/cgroup")
	for _, c := range ctrls {
		p := filepath.Join("/sys/fs/cgroup", c.Name(), d.cgroup)
		if sub, err := os.ReadDir(p); err == nil {
			for _, s := range sub {
				if s.IsDir() {
					d.t.Errorf("leaked cgroup: %s/%s", p, s.Name())
				}
			}
		}
		os.Remove(p) // the empty parent the daemon made for its pods
	}
	for _, dir := range []string{filepath.Join(d.rootDir, "pods"), filepath.Join(d.rootDir, "images", "snapshots"),
		filepath.Join(d.runDir, "containers"), filepath.Join(d.runDir, "pods"), filepath.Join(d.runDir, "libcontainer"),
		d.logsDir} {
		if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
			names := []string{}
			for _, e := range ents {
				names = append(names, e.Name())
			}
			d.t.Errorf("leaked state in %s: %v", dir, names)
		}
	}
}

// procAlive reports whether pid exists and is not a zombie.
func procAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] != 'Z'
}
