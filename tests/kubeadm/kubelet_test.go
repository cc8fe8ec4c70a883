//go:build kubeadm

package kubeadm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/tests/controlplane/cluster"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// The kubelet's machine: containerd at its default paths, and a
// KubeletConfiguration this host needs (cgroup v1, no systemd), the
// conformance test's.
const (
	containerdTOML = `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.k8s.io/pause:3.10.2"
  # The sandbox's -998 needs CAP_SYS_RESOURCE, which this host does not grant.
  restrict_oom_score_adj = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    conf_dir = %q
`
	kubeletKubeadmYAML = `apiVersion: kubeadm.k8s.io/v1beta4
kind: InitConfiguration
localAPIEndpoint:
  advertiseAddress: %[1]s
nodeRegistration:
  name: %[2]s
  criSocket: unix:///var/run/containerd/containerd.sock
  kubeletExtraArgs:
  - name: node-ip
    value: %[1]s
---
apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
kubernetesVersion: v1.37.2
clusterName: air-gapped
---
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
cgroupRoot: %[3]s
failCgroupV1: false
enforceNodeAllocatable: []
evictionHard: {}
`
)

// kubeletIgnoredPreflight: this host's cgroup v1, as for staticpodd.
var kubeletIgnoredPreflight = []string{"SystemVerification"}

// TestKubeadmKubelet is kubeadm init on the same kind of machine with the
// real kubelet v1.37.2 on Debian's containerd, for the figures beside
// TestKubeadm's: init's wall time, the node agent stack's memory after it,
// the preflight errors ignored and the phases skipped.
func TestKubeadmKubelet(t *testing.T) {
	kubelet := os.Getenv("STATICPODD_KUBELET")
	if kubelet == "" {
		t.Fatal("STATICPODD_KUBELET is not set: make test-kubeadm builds the kubelet and sets it")
	}
	for _, tool := range []string{"containerd", "ctr", "containerd-shim-runc-v2", "runc"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is missing (apt-get install -y containerd): %v", tool, err)
		}
	}
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
	tars = append(tars, addonImages(t)...)

	m := newKubeletMachine(t, bin, kubelet, "kubelet1", cluster.Address, tars, "")

	writeFile(t, m.Host("/root/kubeadm.yaml"), fmt.Sprintf(kubeletKubeadmYAML, m.Addr, m.Name, m.Cgroup))
	line := "kubeadm init --config kubeadm.yaml" + ignoring(kubeletIgnoredPreflight)
	out, took := timedSh(t, m, 6*time.Minute, line, initialized)
	t.Logf("%s$ %s\n%s", m.Name, line, out)
	checkIgnored(t, out, kubeletIgnoredPreflight)
	t.Logf("FIGURE kubelet+containerd: kubeadm init wall time (start to %q): %.1fs; preflight errors ignored: %d (%s); phases skipped: 0",
		initialized, took.Seconds(), len(kubeletIgnoredPreflight), strings.Join(kubeletIgnoredPreflight, ","))
	// Not Ready: the machine has no pod network (NetworkNotReady), which
	// the control plane's host-network pods do not need.
	waitMirrors(t, m, false)
	procs, err := m.Procs()
	if err != nil {
		t.Fatal(err)
	}
	var stack int64
	var names []string
	for _, p := range procs {
		if p.Comm == "kubelet" || p.Comm == "containerd" || strings.HasPrefix(p.Comm, "containerd-shim") {
			stack += p.RSS
			names = append(names, fmt.Sprintf("%s %d MiB", p.Comm, p.RSS>>20))
		}
	}
	t.Logf("FIGURE kubelet+containerd: node agent stack RSS after init: %.1f MiB (%s)", float64(stack)/(1<<20), strings.Join(names, ", "))
	// kubeadm detects containerd's socket (the guide's --cri-socket is staticpodd's).
	const reset = "kubeadm reset -f"
	t.Logf("%s$ %s\n%s", m.Name, reset, m.Sh(5*time.Minute, reset))
}

// newKubeletMachine is the machine name at addr with the real kubelet
// (kubelet, the binary) on Debian's containerd, started as its service
// would be, with the image archives tars imported; cni is added to
// containerd's CRI cni section (TOML, "" for none).
func newKubeletMachine(t *testing.T, bin, kubelet, name, addr string, tars []string, cni string) *Machine {
	t.Helper()
	ns, err := cluster.NewNetnsAt("staticpodd-kubeadm-"+testdaemon.RandHex(4), addr)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMachine(t, name, addr, ns, bin, testdaemon.Bin, kubelet, os.Getenv("CRICTL"))
	unit, err := UnitExecStart("../../packaging/kubeadm/10-kubeadm.conf")
	if err != nil {
		t.Fatal(err)
	}
	m.SetExecStart(unit)
	// The kubelet wants its cgroupRoot to exist.
	for _, h := range append([]string{"/sys/fs/cgroup"}, globDirs("/sys/fs/cgroup/*")...) {
		if _, err := os.Stat(filepath.Join(h, "cgroup.procs")); err == nil {
			os.MkdirAll(filepath.Join(h, m.Cgroup), 0o755)
		}
	}

	// containerd as its service would run it: started before kubeadm, and
	// stopped (with what is left of its shims) after the test's reset.
	netd := filepath.Join(m.Dir, "net.d")
	writeFile(t, filepath.Join(m.Dir, "containerd.toml"), fmt.Sprintf(containerdTOML, netd)+cni)
	if err := os.MkdirAll(netd, 0o755); err != nil {
		t.Fatal(err)
	}
	m.Sh(time.Minute, fmt.Sprintf("setsid containerd --config %[1]s/containerd.toml </dev/null >>%[1]s/containerd.log 2>&1 & echo $! >%[1]s/containerd.pid", m.Dir))
	t.Cleanup(func() { stopContainerd(t, m) })
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := m.ShErr(10*time.Second, "ctr version"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(filepath.Join(m.Dir, "containerd.log"))
			t.Fatalf("containerd does not answer:\n%s", b)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for i, tar := range tars {
		name := fmt.Sprintf("image-%d.tar", i)
		copyFile(t, tar, m.Host("/root/"+name))
		m.Sh(2*time.Minute, "ctr -n k8s.io images import "+name)
	}
	return m
}

// stopContainerd stops m's containerd, then kills any shim it left, and
// removes the kubelet's cgroups under m.Cgroup, deepest first.
func stopContainerd(t *testing.T, m *Machine) {
	m.ShErr(time.Minute, fmt.Sprintf("kill $(cat %s/containerd.pid)", m.Dir))
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		procs, _ := m.Procs()
		left := 0
		for _, p := range procs {
			if p.Comm == "containerd" {
				left++
			}
		}
		if left == 0 {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	procs, _ := m.Procs()
	for _, p := range procs {
		if p.Comm != "kubelet" {
			t.Logf("after containerd's stop, killing %d %s", p.PID, p.Comm)
			syscall9(p.PID)
		}
	}
	if err := m.RemoveCgroups(true); err != nil {
		t.Error(err)
	}
}
