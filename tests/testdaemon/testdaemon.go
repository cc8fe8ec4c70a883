// Package testdaemon runs the built staticpodd binary for end-to-end tests: one
// daemon per test with its own root, run, manifest and log dirs, its own cgroup
// root and read-only port, and a cleanup that fails the test on anything left on
// the host. The e2e packages under tests/ share it.
package testdaemon

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testnet"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// Bin and Image are the binary under test and the busybox image tarball; make
// test passes them in STATICPODD_BIN and STATICPODD_IMAGE, otherwise Main builds
// them.
var (
	Bin   string
	Image string
)

// Main is a TestMain: as root it finds or builds the binary and the image, then
// runs the tests. It returns the exit code.
func Main(m *testing.M) int {
	if testnet.IsBlockPlugin() {
		return testnet.BlockPlugin()
	}
	if os.Geteuid() != 0 {
		return m.Run() // root tests skip or fail themselves
	}
	dir, err := os.MkdirTemp("", "staticpodd-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if Bin = os.Getenv("STATICPODD_BIN"); Bin == "" {
		Bin = filepath.Join(dir, "staticpodd")
		cmd := exec.Command("go", "build", "-o", Bin, "./cmd/staticpodd")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build staticpodd: %v\n%s", err, out)
			return 1
		}
	}
	if Image = os.Getenv("STATICPODD_IMAGE"); Image == "" {
		Image = filepath.Join(dir, "busybox.tar")
		cmd := exec.Command("go", "run", "./rootfs/mkimage", "-busybox", "/bin/busybox", "-ref", "busybox:latest", "-o", Image)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build image: %v\n%s", err, out)
			return 1
		}
	}
	stop, err := startRegistry(dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "start the test registry: %v\n", err)
		return 1
	}
	defer stop()
	return m.Run()
}

// ModuleRoot is the directory of the go.mod above the working directory.
func ModuleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Daemon is one staticpodd under test, with every path of its own so that
// several can run side by side.
type Daemon struct {
	T         *testing.T
	Name      string // node name
	Dir       string
	RootDir   string
	RunDir    string
	Manifests string
	LogsDir   string
	Cgroup    string // cgroupRoot
	Config    string
	Port      int // readOnlyPort
	// NodePort is port, the node API's: served only when the config allows
	// it (a kubeconfig or authorization.mode AlwaysAllow); a free port so
	// that daemons side by side never contend for 10250.
	NodePort int
	// HealthzPort is healthzPort, on 127.0.0.1: a free port, so that
	// daemons side by side never contend for the kubelet's 10248.
	HealthzPort int
	// Net is the daemon's own default pod network (bridge and range), and
	// CNIConfDir its CNI configuration directory, empty unless a test puts
	// a configuration there.
	Net        testnet.Net
	CNIConfDir string
	// Bin, when set, is the binary this daemon and its CLI run instead of
	// the package's Bin (another build of staticpodd).
	Bin string
	// SocketOnly: the config serves no read-only port; talk to the CLI socket.
	SocketOnly bool
	Env        []string // extra environment for the daemon
	Args       []string // extra flags for run
	// Nofile, when set, is the open-file limit (soft and hard) the daemon
	// runs under, set with prlimit(1), which execs it in place.
	Nofile int
	// Wrap, when set, is a command that execs the daemon in place, such as
	// nsenter --net=/run/netns/X -- to run it in a network namespace.
	Wrap []string

	mu     sync.Mutex
	cmd    *exec.Cmd
	stderr *lockedBuffer
	exited chan struct{}
}

// RandHex is n random bytes in hex.
func RandHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// New prepares a daemon (not started) with the image imported.
func New(t *testing.T) *Daemon {
	t.Helper()
	testroot.Require(t)
	id := RandHex(4)
	dir := t.TempDir()
	d := &Daemon{
		T:         t,
		Name:      "node-" + id,
		Dir:       dir,
		RootDir:   filepath.Join(dir, "root"),
		RunDir:    filepath.Join("/run", "staticpodd-test-"+id),
		Manifests: filepath.Join(dir, "manifests"),
		LogsDir:   filepath.Join(dir, "logs"),
		Cgroup:    "/staticpodd-test-" + id,
		Config:    filepath.Join(dir, "config.yaml"),

		Net:        testnet.Alloc(t),
		CNIConfDir: filepath.Join(dir, "net.d"),
	}
	ports := FreePorts(t, 3)
	d.Port, d.NodePort, d.HealthzPort = ports[0], ports[1], ports[2]
	for _, p := range []string{d.RootDir, d.Manifests, d.LogsDir, d.CNIConfDir} {
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
port: %d
healthzPort: %d
podLogsDir: %s
cgroupRoot: %s
podPidsLimit: 100
`, d.Manifests, d.Port, d.NodePort, d.HealthzPort, d.LogsDir, d.Cgroup)
	if err := os.WriteFile(d.Config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	d.CLI("images", "import", Image)
	t.Cleanup(d.cleanup)
	return d
}

// CLI runs a staticpodd subcommand against this daemon's dirs and returns stdout;
// it fails the test on a non-zero exit.
func (d *Daemon) CLI(args ...string) string {
	d.T.Helper()
	out, err := d.CLIErr(args...)
	if err != nil {
		d.T.Fatalf("staticpodd %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// CLIErr runs a staticpodd subcommand against this daemon's dirs and returns its
// output, stdout and stderr together.
func (d *Daemon) CLIErr(args ...string) (string, error) {
	// The daemon's dirs go before a "--", after which all is the command's.
	dirs := []string{"--root-dir", d.RootDir, "--run-dir", d.RunDir}
	if len(args) > 1 && args[0] == "images" && args[1] == "pull" {
		dirs = append(dirs, "--registry-config-dir", RegistryDir)
	}
	if i := slices.Index(args, "--"); i >= 0 {
		args = slices.Concat(args[:i], dirs, args[i:])
	} else {
		args = append(slices.Clone(args), dirs...)
	}
	cmd := exec.Command(d.bin(), args...)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	err := cmd.Run()
	return out.String(), err
}

// bin is the binary the daemon and its CLI run.
func (d *Daemon) bin() string {
	if d.Bin != "" {
		return d.Bin
	}
	return Bin
}

// Start starts the daemon and waits until it answers /healthz.
func (d *Daemon) Start() {
	d.T.Helper()
	d.start()
	// Not under d.mu: a daemon that does not answer fails the test with its
	// Output, which takes d.mu.
	d.Eventually(10*time.Second, "the daemon answers /healthz", func() error {
		resp, err := d.Client().Get(d.URL("/healthz"))
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

func (d *Daemon) start() {
	d.T.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	args := []string{d.bin(), "run", "--config", d.Config, "--hostname-override", d.Name,
		"--root-dir", d.RootDir, "--run-dir", d.RunDir}
	if !slices.Contains(d.Args, "--registry-config-dir") {
		args = append(args, "--registry-config-dir", RegistryDir)
	}
	args = append(args, d.NetArgs()...)
	args = append(args, d.Args...)
	if d.Nofile > 0 {
		args = append([]string{"prlimit", fmt.Sprintf("--nofile=%d", d.Nofile), "--"}, args...)
	}
	args = append(slices.Clone(d.Wrap), args...)
	cmd := exec.Command(args[0], args[1:]...)
	if d.stderr != nil {
		d.stderr.retire() // wakes WaitOutput to read the new daemon's output
	}
	d.stderr = &lockedBuffer{}
	var out io.Writer = d.stderr
	var logFile *os.File
	if dir := os.Getenv("STATICPODD_TEST_DAEMON_LOGS"); dir != "" {
		// Every daemon's whole output, restarts included, kept for after
		// the test: a failure shows only the end of the last one's.
		f, err := os.OpenFile(filepath.Join(dir, d.Name+".log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			d.T.Fatal(err)
		}
		logFile, out = f, io.MultiWriter(d.stderr, f)
	}
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Env = append(os.Environ(), d.Env...)
	if err := cmd.Start(); err != nil {
		d.T.Fatal(err)
	}
	d.cmd = cmd
	d.exited = make(chan struct{})
	go func(exited chan struct{}) {
		cmd.Wait()
		if logFile != nil {
			logFile.Close()
		}
		close(exited)
	}(d.exited)
	// Not under d.mu: Eventually shows Output when it fails.
	d.mu.Unlock()
	defer d.mu.Lock()
	d.Eventually(30*time.Second, "the daemon answers /healthz", func() error {
		resp, err := d.Client().Get(d.URL("/healthz"))
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

// Signal sends sig to the daemon.
func (d *Daemon) Signal(sig os.Signal) {
	d.T.Helper()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		d.T.Fatal("signal: the daemon was never started")
	}
	d.cmd.Process.Signal(sig)
}

// PID is the process ID of the daemon started last.
func (d *Daemon) PID() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cmd == nil {
		return 0
	}
	return d.cmd.Process.Pid
}

// Exited is closed when the daemon last started has exited.
func (d *Daemon) Exited() <-chan struct{} {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.exited
}

// Kill9 kills the daemon the way a crash or OOM would: no chance to clean up.
func (d *Daemon) Kill9() {
	d.T.Helper()
	d.mu.Lock()
	cmd, exited := d.cmd, d.exited
	d.mu.Unlock()
	cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// Stop sends SIGTERM and waits for the daemon to exit.
func (d *Daemon) Stop() {
	d.T.Helper()
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
		d.T.Error("daemon did not exit within 30s of SIGTERM")
	}
}

// Running reports whether the daemon started last is still running.
func (d *Daemon) Running() bool {
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
func (d *Daemon) cleanup() {
	// Stopped even when its pods did not go in time, which ends the test
	// here: never left running after it.
	defer d.Stop()
	entries, _ := os.ReadDir(d.Manifests)
	for _, e := range entries {
		os.Remove(filepath.Join(d.Manifests, e.Name()))
	}
	// A bundle applied runs too (the bundle source): without a current
	// bundle it runs none.
	os.Remove(filepath.Join(d.RootDir, "bundles", "state.json"))
	if !d.Running() {
		d.Start()
	}
	d.Eventually(90*time.Second, "every pod is gone", func() error {
		if pods := d.Pods(); len(pods) > 0 {
			return fmt.Errorf("%d pods left", len(pods))
		}
		// Pods the daemon found running but no manifest wants (removed while
		// it was down) are not listed while it removes them: wait for their
		// sandboxes to go too.
		if sbs, _ := os.ReadDir(filepath.Join(d.RunDir, "pods")); len(sbs) > 0 {
			return fmt.Errorf("%d sandboxes left", len(sbs))
		}
		return nil
	})
	d.Stop()
	d.AssertNoLeaks()
	if d.T.Failed() {
		// A leak, too, is explained by what the daemon said.
		d.T.Logf("daemon output:\n%s", d.OutputTail())
	}
	os.RemoveAll(d.RunDir)
}

// maxShownOutput is how much of the daemon's output a failed test shows: its
// end, so that a daemon that logged without bound does not flood the report.
const maxShownOutput = 256 << 10

// URL is the address of path on the read-only port, or on the CLI socket.
func (d *Daemon) URL(path string) string {
	if d.SocketOnly {
		return "http://staticpodd" + path
	}
	return fmt.Sprintf("http://127.0.0.1:%d%s", d.Port, path)
}

// Client talks to the read-only port, or to <run-dir>/staticpodd.sock.
func (d *Daemon) Client() *http.Client {
	if !d.SocketOnly {
		return http.DefaultClient
	}
	return d.SocketClient()
}

// SocketClient talks to <run-dir>/staticpodd.sock whatever the config serves;
// any host name in a URL reaches it. Each request has a connection of its
// own, closed after it: a client made per call would otherwise leave its idle
// connection open, and a test polling every 100 ms would fill the socket's
// connection cap with them.
func (d *Daemon) SocketClient() *http.Client {
	sock := filepath.Join(d.RunDir, "staticpodd.sock")
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dialer net.Dialer
			return dialer.DialContext(ctx, "unix", sock)
		},
		DisableKeepAlives: true,
	}}
}

// BuildImage builds a busybox image tarball with extra mkimage flags.
func BuildImage(t testing.TB, out string, args ...string) {
	t.Helper()
	root, err := ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	args = append([]string{"run", "./rootfs/mkimage", "-busybox", "/bin/busybox", "-o", out}, args...)
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build image: %v\n%s", err, b)
	}
}

// Pods returns the pods the read-only port reports.
func (d *Daemon) Pods() []v1.Pod {
	d.T.Helper()
	resp, err := d.Client().Get(d.URL("/pods"))
	if err != nil {
		d.T.Fatalf("GET /pods: %v", err)
	}
	defer resp.Body.Close()
	var list v1.PodList
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		d.T.Fatalf("decode /pods: %v", err)
	}
	return list.Items
}

// Pod returns the pod with the given manifest name, or nil.
func (d *Daemon) Pod(name string) *v1.Pod {
	full := name + "-" + d.Name
	for _, p := range d.Pods() {
		if p.Name == full {
			return &p
		}
	}
	return nil
}

// WriteManifest puts a manifest into the watched directory atomically, the way
// tools should: write elsewhere, then rename(2).
func (d *Daemon) WriteManifest(file, content string) {
	d.T.Helper()
	tmp := filepath.Join(d.Dir, "."+file+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		d.T.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(d.Manifests, file)); err != nil {
		d.T.Fatal(err)
	}
}

// RemoveManifest removes a manifest from the watched directory.
func (d *Daemon) RemoveManifest(file string) {
	d.T.Helper()
	if err := os.Remove(filepath.Join(d.Manifests, file)); err != nil {
		d.T.Fatal(err)
	}
}

// Eventually polls f until it returns nil or the timeout passes.
func (d *Daemon) Eventually(timeout time.Duration, what string, f func() error) {
	d.T.Helper()
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
			d.T.Fatalf("waited %s for %s: %v\ndaemon output:\n%s", timeout, what, err, d.OutputTail())
		case <-tick.C:
		}
	}
}

// WaitRunning waits until every container of the pod is running and returns the pod.
func (d *Daemon) WaitRunning(name string, timeout time.Duration) *v1.Pod {
	d.T.Helper()
	var pod *v1.Pod
	d.Eventually(timeout, name+" running", func() error {
		pod = d.Pod(name)
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

// AssertNoLeaks checks that nothing of this daemon's pods is left on the host:
// mounts under its dirs, cgroups under its cgroupRoot, state files, and on
// its pod network veths, iptables rules and IPAM leases.
func (d *Daemon) AssertNoLeaks() {
	d.T.Helper()
	d.assertThreadsInHostNamespaces()
	// Nor a monitor, not even the spare a running daemon keeps for its next
	// start while it has a pod: with no pod left it has no container to run.
	d.Eventually(10*time.Second, "no monitor left with no pod", func() error {
		if m := d.Monitors(); len(m) > 0 {
			return fmt.Errorf("monitors %v still run", m)
		}
		return nil
	})
	if left, err := d.Net.Leftovers(d.IPAMDir(), ""); err != nil {
		d.T.Error(err)
	} else if len(left) > 0 {
		d.T.Errorf("leaked pod network: %q", left)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		d.T.Fatal(err)
	}
	for _, line := range strings.Split(string(mi), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		if strings.HasPrefix(f[4], d.RootDir) || strings.HasPrefix(f[4], d.RunDir) {
			d.T.Errorf("leaked mount: %s", f[4])
		}
	}
	ctrls, _ := os.ReadDir("/sys/fs/cgroup")
	for _, c := range ctrls {
		p := filepath.Join("/sys/fs/cgroup", c.Name(), d.Cgroup)
		if sub, err := os.ReadDir(p); err == nil {
			for _, s := range sub {
				if s.IsDir() {
					d.T.Errorf("leaked cgroup: %s/%s", p, s.Name())
				}
			}
		}
		os.Remove(p) // the empty parent the daemon made for its pods
	}
	for _, dir := range []string{filepath.Join(d.RootDir, "pods"), filepath.Join(d.RootDir, "images", "snapshots"),
		filepath.Join(d.RunDir, "containers"), filepath.Join(d.RunDir, "pods"), filepath.Join(d.RunDir, "libcontainer"),
		filepath.Join(d.RunDir, "debug"), d.LogsDir} {
		if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
			names := []string{}
			for _, e := range ents {
				names = append(names, e.Name())
			}
			d.T.Errorf("leaked state in %s: %v", dir, names)
		}
	}
}

// assertThreadsInHostNamespaces: every thread of a running daemon is in the
// test's own network, IPC and UTS namespaces, none left in a pod's (which
// would also keep the pod's namespaces alive after the pod).
func (d *Daemon) assertThreadsInHostNamespaces() {
	d.T.Helper()
	pid := d.PID()
	if pid == 0 || !ProcAlive(pid) {
		return
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return // it just exited
	}
	for _, ns := range []string{"net", "ipc", "uts"} {
		own, err := os.Readlink("/proc/thread-self/ns/" + ns)
		if err != nil {
			d.T.Fatal(err)
		}
		for _, t := range tasks {
			got, err := os.Readlink(fmt.Sprintf("/proc/%d/task/%s/ns/%s", pid, t.Name(), ns))
			if err == nil && got != own {
				d.T.Errorf("daemon thread %s is in %s, not the host's %s", t.Name(), got, own)
			}
		}
	}
}

// NetArgs are the flags that give run the daemon's own pod network.
func (d *Daemon) NetArgs() []string {
	return []string{"--cni-conf-dir", d.CNIConfDir, "--pod-network-bridge", d.Net.Bridge, "--pod-cidr", d.Net.Subnet.String()}
}

// IPAMDir is where the daemon's default network keeps its leases.
func (d *Daemon) IPAMDir() string {
	return filepath.Join(d.RunDir, "cni", "networks")
}

// Monitors are the pids of the container monitors of this daemon's run dir,
// spare ones included.
func (d *Daemon) Monitors() []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f, err := os.Open(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(io.LimitReader(f, 4096))
		f.Close()
		args := strings.Split(string(b), "\x00")
		if args[0] == "staticpodd-monitor" && len(args) > 3 && strings.HasPrefix(args[3], d.RunDir+"/") {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ProcAlive reports whether pid exists and is not a zombie.
func ProcAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] != 'Z'
}
