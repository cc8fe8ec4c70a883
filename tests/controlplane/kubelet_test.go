//go:build controlplane

package controlplane

import (
	"bytes"
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

// kubeadmKubelet runs script in a mount and network namespace of its own,
// where /var/lib/kubelet and /etc/kubernetes are empty tmpfs, as kubeadm
// finds them on a new machine, and the loopback is up. $KUBEADM is the real
// kubeadm v1.37.2, $DIR dir.
func kubeadmKubelet(t *testing.T, dir, script string) *exec.Cmd {
	t.Helper()
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/var/lib/kubelet", "/etc/kubernetes"} {
		// Mount points only: nothing is written there but on the tmpfs.
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command("unshare", "-m", "-n", "sh", "-ec", `
mount -t tmpfs tmpfs /var/lib/kubelet
mount -t tmpfs tmpfs /etc/kubernetes
ip link set lo up
cd "$DIR"
`+script)
	cmd.Env = append(os.Environ(), "KUBEADM="+filepath.Join(bin, "kubeadm"), "DIR="+dir)
	return cmd
}

// The kubeadm files agent/config's tests load (its testdata/kubeadm) are
// exactly what kubeadm v1.37.2 writes for its kubeadm.yaml.
func TestKubeadmKubeletFilesAreKubeadms(t *testing.T) {
	root, err := testdaemon.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	testdata := filepath.Join(root, "agent", "config", "testdata", "kubeadm")
	dir := t.TempDir()
	cmd := kubeadmKubelet(t, dir, `
"$KUBEADM" init phase kubelet-start --config "`+filepath.Join(testdata, "kubeadm.yaml")+`"
cp /var/lib/kubelet/config.yaml /var/lib/kubelet/kubeadm-flags.env "$DIR"
`)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kubeadm: %v\n%s", err, out)
	}
	for _, f := range []string{"config.yaml", "kubeadm-flags.env"} {
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(testdata, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("kubeadm wrote %s:\n%s\ntestdata has:\n%s", f, got, want)
		}
	}
}

// staticpodd, invoked as kubelet with the command line of kubeadm's
// kubelet.service drop-in (10-kubeadm.conf) on the files kubeadm wrote
// (certificates, kubelet.conf, config.yaml, kubeadm-flags.env), starts with
// no warning but those of the fields it does not honour, and answers
// kubeadm on the healthz port.
func TestKubeletPersonalityRunsOnKubeadmFiles(t *testing.T) {
	root, err := testdaemon.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	id := testdaemon.RandHex(4)
	runDir := "/run/staticpodd-test-" + id
	cgroupRoot := "/staticpodd-test-" + id
	t.Cleanup(func() {
		os.RemoveAll(runDir)
		for _, c := range []string{"/sys/fs/cgroup" + cgroupRoot, "/sys/fs/cgroup/memory" + cgroupRoot, "/sys/fs/cgroup/pids" + cgroupRoot, "/sys/fs/cgroup/cpu" + cgroupRoot} {
			os.Remove(c)
		}
	})
	kubeadmYAML, err := os.ReadFile(filepath.Join(root, "agent", "config", "testdata", "kubeadm", "kubeadm.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	// The node's CRI socket is this daemon's: in its own run dir.
	kubeadmYAML = bytes.ReplaceAll(kubeadmYAML, []byte("unix:///run/staticpodd/cri.sock"), []byte("unix://"+runDir+"/cri.sock"))
	if err := os.WriteFile(filepath.Join(dir, "kubeadm.yaml"), kubeadmYAML, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(testdaemon.Bin, filepath.Join(dir, "kubelet")); err != nil {
		t.Fatal(err)
	}
	// kubeadm's preflight (KubeletVersion) runs `kubelet --version` and
	// wants exactly this line.
	if v, err := exec.Command(filepath.Join(dir, "kubelet"), "--version").Output(); err != nil || string(v) != "Kubernetes "+cluster.KubernetesVersion+"\n" {
		t.Errorf("kubelet --version = %q, %v", v, err)
	}
	// What kubeadm init does before the kubelet starts, then the kubelet
	// as 10-kubeadm.conf starts it, with KUBELET_EXTRA_ARGS from
	// /etc/default/kubelet for what differs on this test machine.
	cmd := kubeadmKubelet(t, dir, `
"$KUBEADM" init phase certs ca --config kubeadm.yaml
"$KUBEADM" init phase kubeconfig kubelet --config kubeadm.yaml
"$KUBEADM" init phase kubelet-start --config kubeadm.yaml
KUBELET_KUBECONFIG_ARGS="--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf --kubeconfig=/etc/kubernetes/kubelet.conf"
KUBELET_CONFIG_ARGS="--config=/var/lib/kubelet/config.yaml"
. /var/lib/kubelet/kubeadm-flags.env
KUBELET_EXTRA_ARGS="--root-dir=$DIR/root --run-dir=`+runDir+` --cgroup-driver=cgroupfs --cgroup-root=`+cgroupRoot+`"
exec ./kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	}()

	// kubeadm's wait: http://127.0.0.1:10248/healthz, in the daemon's
	// network namespace.
	healthz := func(query string) (string, error) {
		b, err := exec.Command("nsenter", fmt.Sprintf("--net=/proc/%d/ns/net", cmd.Process.Pid),
			"wget", "-qO-", "http://127.0.0.1:10248/healthz"+query).CombinedOutput()
		return string(b), err
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		select {
		case err := <-exited:
			t.Fatalf("the daemon exited: %v\n%s", err, out.String())
		default:
		}
		if got, err := healthz(""); err == nil && got == "ok" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no healthz port after 60s\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if got, err := healthz("?verbose"); err != nil || got != "[+]ping ok\nhealthz check passed\n" {
		t.Errorf("healthz?verbose = %q, %v", got, err)
	}

	// It runs as kubeadm configured it: the CLI finds it in its run dir.
	cfgOut, err := exec.Command(testdaemon.Bin, "ps", "--run-dir", runDir).CombinedOutput()
	if err != nil {
		t.Errorf("staticpodd ps: %v\n%s", err, cfgOut)
	}
	var warnings []string
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "level=WARN") && (strings.Contains(line, "configuration field") || strings.Contains(line, "kubelet flag")) {
			warnings = append(warnings, line)
		}
	}
	want := []string{"clusterDNS is set", "clusterDomain is set", "pod-infra-container-image"}
	if len(warnings) != len(want) {
		t.Errorf("warnings:\n%s\nwant one for each of %q", strings.Join(warnings, "\n"), want)
	}
	for _, w := range want {
		if !strings.Contains(strings.Join(warnings, "\n"), w) {
			t.Errorf("no warning about %s:\n%s", w, strings.Join(warnings, "\n"))
		}
	}
	if strings.Contains(out.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", out.String())
	}
}
