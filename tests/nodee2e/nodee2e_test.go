//go:build nodee2e

// Package nodee2e runs the kubelet's own node e2e suites (e2e_node.test of
// Kubernetes v1.37.2, unchanged) against staticpodd: the static pod, mirror
// pod and grace-period suites with staticpodd registered on a real API
// server, and the standalone suite with staticpodd given no kubeconfig.
//
// The API server, etcd and controller-manager are the control-plane test's
// (tests/controlplane/cluster), run by a staticpodd of their own that
// registers no node. The suite needs them in both modes, as upstream's run
// has them: its framework makes a namespace per test through the API even
// when the node agent is standalone. The node agent under test is a second
// staticpodd, configured as the suite configures its kubelet (ports 10250,
// 10255 and 10248, anonymous and AlwaysAllow on the node API, pod logs in
// /var/log/pods), with the images the suite names imported. Both daemons, the
// control plane and e2e_node.test share a network namespace of the test's own
// and a private mount namespace, in which /var/log is a tmpfs: nothing of the
// host's is used or changed.
//
// The suite restarts its kubelet with "sudo systemctl restart kubelet-<x>".
// sudo and systemctl on its PATH are this test binary under those names: sudo
// runs its arguments, systemctl asks the test, over a unix socket, to list,
// stop (SIGTERM: staticpodd's pods outlive it, as with KillMode=process) or
// restart the daemon, which it knows as the unit kubelet-staticpodd.service.
//
// It needs e2e_node.test (tests/controlplane/build.sh e2e_node) and the
// control plane's binaries, so it is behind the build tag nodee2e: make
// test-node-e2e builds them and runs it.
package nodee2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/tests/controlplane/cluster"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// privateEnv marks the test binary re-executed in its own mount namespace.
const privateEnv = "STATICPODD_NODE_E2E_PRIVATE"

func TestMain(m *testing.M) {
	switch filepath.Base(os.Args[0]) {
	case "systemctl":
		os.Exit(systemctlShim(os.Args[1:]))
	case "sudo":
		os.Exit(sudoShim(os.Args[1:]))
	}
	switch os.Getenv(privateEnv) {
	case "":
		if os.Geteuid() == 0 {
			os.Exit(reexecPrivate())
		}
	case "1":
		// /var/log/pods, where the suite reads container logs, is the
		// kubelet's and the host's: here a tmpfs of this namespace holds it.
		if err := syscall.Mount("tmpfs", "/var/log", "tmpfs", 0, "mode=0755"); err != nil {
			fmt.Fprintln(os.Stderr, "mount a tmpfs on /var/log:", err)
			os.Exit(1)
		}
		if err := os.Mkdir("/var/log/pods", 0o755); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		// What this binary runs (CNI plugins of the test network, the
		// shims) is in the namespace already.
		os.Setenv(privateEnv, "mounted")
	}
	os.Exit(testdaemon.Main(m))
}

// reexecPrivate runs this test binary again with its arguments in a mount
// namespace of its own whose mounts propagate nowhere, and returns its exit
// code.
func reexecPrivate() int {
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cmd := exec.Command("unshare", append([]string{"--mount", "--propagation", "private", "--", exe}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), privateEnv+"=1")
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// The images the four suites name (k8s.io/kubernetes/test/utils/image at
// v1.37.2), built offline from the static busybox, each an honest stand-in
// for what the suites use it for:
//   - busybox: busybox, as upstream's is;
//   - pause: a process that sleeps until SIGTERM or SIGINT and then exits 0,
//     as pause does;
//   - nginx: busybox's httpd serving on port 80, stopped by SIGQUIT (the
//     image's stop signal, as nginx's) or SIGTERM; the suites only run it.
//
// The shell scripts trap the signals: a container's PID 1 gets none it has
// no handler for, and would outlive its grace period.
var images = []struct {
	ref    string
	file   string // file name in the cache
	script string // the image's command, at /entrypoint; none: sh
	args   []string
}{
	{"registry.k8s.io/e2e-test-images/busybox:1.37.0-2", "busybox.tar", "", nil},
	{"registry.k8s.io/pause:3.10.2", "pause.tar",
		"#!/bin/sh\ntrap 'exit 0' TERM INT\nwhile :; do sleep 3600 & wait $!; done\n", nil},
	{"registry.k8s.io/e2e-test-images/nginx:1.27.0-2", "nginx.tar",
		"#!/bin/sh\nhttpd -f -p 80 -h /tmp &\ntrap 'kill $!; exit 0' TERM INT QUIT\nwait $!\n",
		[]string{"-stop-signal", "SIGQUIT"}},
}

// buildImages builds the images into CacheDir()/node-e2e-images (a second
// or two each, so every run) and returns their tarballs.
func buildImages(t *testing.T, root string) []string {
	t.Helper()
	cache, err := cluster.CacheDir()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(cache, "node-e2e-images")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var tars []string
	for _, img := range images {
		out := filepath.Join(dir, img.file)
		args := []string{"run", "./rootfs/mkimage", "-busybox", "/bin/busybox", "-ref", img.ref, "-o", out + ".tmp"}
		if img.script != "" {
			script := filepath.Join(t.TempDir(), "entrypoint")
			if err := os.WriteFile(script, []byte(img.script), 0o755); err != nil {
				t.Fatal(err)
			}
			args = append(args, "-add", script+":/entrypoint", "-cmd", "/entrypoint")
		}
		cmd := exec.Command("go", append(args, img.args...)...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", img.ref, err, b)
		}
		if err := os.Rename(out+".tmp", out); err != nil {
			t.Fatal(err)
		}
		tars = append(tars, out)
	}
	return tars
}

// e2eBinary is $STATICPODD_E2E_NODE, else build.sh's e2e_node.test in the
// cache.
func e2eBinary(t *testing.T) string {
	bin := os.Getenv("STATICPODD_E2E_NODE")
	if bin == "" {
		cache, err := cluster.CacheDir()
		if err != nil {
			t.Fatal(err)
		}
		bin = filepath.Join(cache, "e2e_node", "e2e_node.test")
	}
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%v (build it with tests/controlplane/build.sh e2e_node)", err)
	}
	return bin
}

// env is the shared part of a run: the control plane and what the suite
// needs to reach it.
type env struct {
	root  string
	ns    *cluster.Netns
	cl    *cluster.Cluster
	token string             // a bearer token of a cluster-admin service account
	tars  []string           // the suite's images
	node  *testdaemon.Daemon // the node agent under test
	// work is the suite's working directory, where the node agent's
	// config file is: the suite rewrites <work>/kubelet-config to change
	// the kubelet's config, as its own run starts the kubelet with it.
	work string
}

// startControlPlane runs etcd, kube-apiserver and kube-controller-manager
// under a staticpodd with no kubeconfig, for the node named node.
func startControlPlane(t *testing.T, node string) *env {
	t.Helper()
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := testdaemon.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	tars, err := cluster.Images(root, bin)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cluster.NewNetns("staticpodd-ne2e-" + testdaemon.RandHex(4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := ns.Close(); err != nil {
			t.Error(err)
		}
	})
	cp := testdaemon.New(t)
	cp.Wrap = ns.Wrap()
	cp.SocketOnly = true
	cl, err := cluster.Generate(context.Background(), bin, t.TempDir(), node, ns)
	if err != nil {
		t.Fatal(err)
	}
	cp.CLI(append([]string{"images", "import"}, tars...)...)
	for _, c := range cluster.Components {
		if c.Name == "kube-scheduler" {
			continue // the suites bind every pod to the node themselves
		}
		b, err := os.ReadFile(cl.Manifest(c.Name))
		if err != nil {
			t.Fatal(err)
		}
		cp.WriteManifest(c.Name+".yaml", asUpstream(c.Name, string(b)))
	}
	cp.Start()
	ctx := context.Background()
	cp.Eventually(4*time.Minute, "the API server is ready", func() error {
		_, err := cl.Kubectl(ctx, "super-admin", "get", "--raw", "/readyz")
		return err
	})
	if err := cl.BindClusterAdmins(ctx); err != nil {
		t.Fatal(err)
	}
	// The suite talks to the API server with a bearer token (--bearer-token),
	// as its own run does with the token file it gives its API server.
	for _, args := range [][]string{
		{"-n", "kube-system", "create", "serviceaccount", "node-e2e"},
		{"create", "clusterrolebinding", "node-e2e", "--clusterrole=cluster-admin", "--serviceaccount=kube-system:node-e2e"},
	} {
		if _, err := cl.Kubectl(ctx, "admin", args...); err != nil {
			t.Fatal(err)
		}
	}
	token, err := cl.Kubectl(ctx, "admin", "-n", "kube-system", "create", "token", "node-e2e", "--duration=12h")
	if err != nil {
		t.Fatal(err)
	}
	return &env{root: root, ns: ns, cl: cl, token: strings.TrimSpace(string(token)), tars: buildImages(t, root)}
}

// asUpstream is kubeadm's manifest of the control-plane component name,
// changed where the suite's own control plane (test/e2e_node/services)
// differs in what the suite relies on:
//   - kube-apiserver presents no client certificate to kubelets
//     (--kubelet-client-certificate, -key): the suite reads /configz through
//     the API server's node proxy, also after ReloadKubeletClientCAFileTest
//     has pointed the node agent's clientCAFile at a CA of its own, and a
//     kubelet refuses a certificate its CA did not sign, anonymous or not;
//     with no certificate the request is anonymous, which the suite's node
//     agent allows;
//   - the Node is tainted by none of its conditions: kube-apiserver runs
//     without the TaintNodesByCondition admission plugin, as upstream's does
//     (it would register the Node with node.kubernetes.io/not-ready), and
//     kube-controller-manager without the node lifecycle controller
//     (upstream runs no controller-manager, only a namespace controller),
//     which would taint the Node by its conditions. The suite looks its node
//     up among the untainted ones, also while SystemNodeCriticalPod holds it
//     under the DiskPressure it waits for.
func asUpstream(name, manifest string) string {
	var out []string
	for _, l := range strings.SplitAfter(manifest, "\n") {
		f := strings.TrimSpace(l)
		switch {
		case name == "kube-apiserver" && (strings.HasPrefix(f, "- --kubelet-client-certificate=") || strings.HasPrefix(f, "- --kubelet-client-key=")):
			continue
		case name == "kube-apiserver" && f == "- kube-apiserver":
			indent := l[:strings.Index(l, "-")]
			l += indent + "- --disable-admission-plugins=TaintNodesByCondition\n"
		case name == "kube-controller-manager" && strings.HasPrefix(f, "- --controllers="):
			l = strings.TrimRight(l, "\n") + ",-node-lifecycle-controller\n"
		}
		out = append(out, l)
	}
	return strings.Join(out, "")
}

// configure writes the node agent's config: the suite's kubelet's
// (test/e2e_node/services/kubelet.go) where staticpodd has the field.
func configure(t *testing.T, d *testdaemon.Daemon) {
	t.Helper()
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
staticPodPath: %s
fileCheckFrequency: 10s
evictionPressureTransitionPeriod: 30s
address: 0.0.0.0
readOnlyPort: 10255
port: 10250
healthzPort: 10248
healthzBindAddress: 127.0.0.1
podLogsDir: /var/log/pods
cgroupRoot: %s
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
`, d.Manifests, d.Cgroup)
	if err := os.WriteFile(d.Config, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
}

// focus is what each run runs: every It of the four files, by file.
var focus = map[string]string{
	"mirror":     `mirror_pod_test\.go|mirror_pod_grace_period_test\.go|static_pod_test\.go`,
	"standalone": `standalone_test\.go`,
}

// wideFocus is the widened run's: the other Its of the suite that a node
// agent running static pods only can be judged by (docs/kubelet-differences.md
// classifies every [NodeConformance] It). They inspect the Node, its Lease
// and the node API, rewrite the kubelet's config file and restart it, or run
// a static pod; every other [NodeConformance] It makes its pods through the
// API, which staticpodd fails (StaticPodsOnly).
var wideFocus = strings.Join([]string{
	`NodeLease NodeLease `,                     // node_lease.go
	`Kubelet Endpoints `,                       // endpoints_test.go
	`KubletTLS `,                               // kubelet_tls_test.go (sic)
	`ReloadKubeletClientCAFileTest `,           // kubelet_server_tls_test.go
	`Unknown Pods when creating a mirror pod `, // unknown_pods_test.go
}, "|")

// focusFlag selects what a run runs: the four files, the widened set, or
// $NODE_E2E_FOCUS (a ginkgo focus regexp) to try other Its against staticpodd.
func focusFlag(mode string) string {
	if f := os.Getenv("NODE_E2E_FOCUS"); f != "" {
		return "--ginkgo.focus=" + f
	}
	if mode == "wide" {
		return "--ginkgo.focus=" + wideFocus
	}
	return "--ginkgo.focus-file=" + focus[mode]
}

// run runs e2e_node.test in the namespace against e.node, with the flags
// given after the common ones, and fails t if the suite fails.
func (e *env) run(t *testing.T, mode string, extra ...string) {
	t.Helper()
	bin := e2eBinary(t)
	shims := t.TempDir()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"sudo", "systemctl"} {
		if err := os.Symlink(self, filepath.Join(shims, name)); err != nil {
			t.Fatal(err)
		}
	}
	sock := serveUnit(t, e.node)
	report := os.Getenv("NODE_E2E_REPORT_DIR")
	if report == "" {
		report = t.TempDir()
	}
	report = filepath.Join(report, mode)
	args := []string{
		"--node-name=" + e.node.Name,
		"--host=https://" + cluster.Address + ":6443",
		"--bearer-token=" + e.token,
		"--start-services=false",
		"--prepull-images=false",
		"--standalone-mode=" + fmt.Sprint(mode == "standalone"),
		// The CRI the suite inspects containers through (ListContainers),
		// staticpodd's own.
		"--container-runtime-endpoint=unix://" + filepath.Join(e.node.RunDir, "cri.sock"),
		// The suites' feature-gated Its (EnvFiles, RestartAllContainers)
		// run only with the gates on in the suite, as their own jobs set.
		"--feature-gates=EnvFiles=true,ContainerRestartRules=true,RestartAllContainersOnContainerExits=true",
		"--report-dir=" + report,
		focusFlag(mode),
		"--ginkgo.junit-report=" + filepath.Join(report, "junit.xml"),
		"--ginkgo.no-color",
		"--ginkgo.v",
	}
	args = append(args, extra...)
	cmd := e.ns.Command(context.Background(), bin, args...)
	cmd.Dir = e.work
	cmd.Env = append(os.Environ(),
		"PATH="+shims+":"+os.Getenv("PATH"),
		unitSockEnv+"="+sock)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	start := time.Now()
	err = cmd.Run()
	t.Logf("e2e_node.test (%s) took %s; report in %s", mode, time.Since(start).Round(time.Second), report)
	if err != nil {
		t.Errorf("e2e_node.test (%s): %v", mode, err)
	}
}

// TestNodeE2E runs the mirror-pod suites with staticpodd registered on the
// API server, then the standalone suite with staticpodd given no kubeconfig.
func TestNodeE2E(t *testing.T) {
	// The node kubeadm's kubelet.conf is for: the mirror run's daemon.
	nodeName := "node-" + testdaemon.RandHex(4)
	e := startControlPlane(t, nodeName)
	var extra []string
	if skip := os.Getenv("NODE_E2E_SKIP"); skip != "" {
		extra = append(extra, "--ginkgo.skip="+skip)
	}
	t.Run("mirror", func(t *testing.T) {
		// Schedulable, as the kubelet registers its Node: the suite's
		// framework counts the ready nodes among the schedulable ones
		// (e2enode.TotalReady) after it restarts the node agent.
		e.start(t, nodeName, "--node-ip", cluster.Address, "--kubeconfig", e.cl.Kubeconfig("kubelet"), "--register-schedulable=true")
		e.run(t, "mirror", extra...)
	})
	t.Run("wide", func(t *testing.T) {
		if os.Getenv("NODE_E2E_WIDE") == "" {
			t.Skip("the widened set runs with NODE_E2E_WIDE=1 (make test-node-e2e-wide)")
		}
		e.start(t, nodeName, "--node-ip", cluster.Address, "--kubeconfig", e.cl.Kubeconfig("kubelet"), "--register-schedulable=true")
		e.run(t, "wide", extra...)
	})
	t.Run("standalone", func(t *testing.T) {
		// No Node, as in upstream's standalone run: the framework waits
		// for every Node to be Ready after each test, and the mirror run's
		// is not any more.
		if _, err := e.cl.Kubectl(context.Background(), "admin", "delete", "node", nodeName, "--ignore-not-found"); err != nil {
			t.Fatal(err)
		}
		e.start(t, "")
		e.run(t, "standalone", extra...)
	})
}

// start starts the node agent under test in the namespace, named name (if
// not ""), with the suite's images and extra flags; the subtest's cleanup
// removes its pods and stops it while the control plane still runs.
func (e *env) start(t *testing.T, name string, args ...string) {
	t.Helper()
	d := testdaemon.New(t)
	if name != "" {
		d.Name = name
	}
	d.Wrap = e.ns.Wrap()
	d.SocketOnly = true
	d.Args = append(d.Args, args...)
	e.work = t.TempDir()
	d.Config = filepath.Join(e.work, "kubelet-config")
	configure(t, d)
	d.CLI(append([]string{"images", "import"}, e.tars...)...)
	d.Start()
	e.node = d
}

// The API server of the run keeps every flag but the client certificate it
// would present to the node agent and runs without TaintNodesByCondition; the
// controller-manager runs all its controllers but the node lifecycle
// controller.
func TestAsUpstream(t *testing.T) {
	for _, c := range []struct{ name, in, want string }{
		{"kube-apiserver", `spec:
  containers:
  - command:
    - kube-apiserver
    - --kubelet-client-certificate=/pki/apiserver-kubelet-client.crt
    - --kubelet-client-key=/pki/apiserver-kubelet-client.key
    - --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname
    - --client-ca-file=/pki/ca.crt
`, `spec:
  containers:
  - command:
    - kube-apiserver
    - --disable-admission-plugins=TaintNodesByCondition
    - --kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname
    - --client-ca-file=/pki/ca.crt
`},
		{"kube-controller-manager", `    - kube-controller-manager
    - --controllers=*,bootstrapsigner,tokencleaner
    - --kubeconfig=/kubeconfig/controller-manager.conf
`, `    - kube-controller-manager
    - --controllers=*,bootstrapsigner,tokencleaner,-node-lifecycle-controller
    - --kubeconfig=/kubeconfig/controller-manager.conf
`},
		{"etcd", "    - etcd\n    - --controllers=x\n", "    - etcd\n    - --controllers=x\n"},
	} {
		if got := asUpstream(c.name, c.in); got != c.want {
			t.Errorf("%s: got\n%s\nwant\n%s", c.name, got, c.want)
		}
	}
}
