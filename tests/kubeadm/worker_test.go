//go:build kubeadm

package kubeadm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/controlplane/cluster"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// The worker's pod network: a bridge on the machine, from Debian's CNI
// plugins, whose host-local leases stay in the machine's directory
// (dataDir: %[1]s) rather than the host's /var/lib/cni.
const (
	workerCNI = "    bin_dir = \"/usr/lib/cni\"\n"
	bridgeCNI = `{
  "cniVersion": "0.4.0",
  "name": "worker",
  "plugins": [{
    "type": "bridge",
    "bridge": "cni0",
    "isGateway": true,
    "ipam": {"type": "host-local", "subnet": "10.244.1.0/24", "dataDir": %q}
  }, {"type": "loopback"}]
}
`
	// The KubeletConfiguration of the cluster (kubeadm-config's, which
	// join downloads) patched for this host, as TestKubeadmKubelet's:
	// cgroup v1, no systemd, the machine's own cgroupRoot.
	workerKubeletPatch = `[
  {"op": "add", "path": "/cgroupRoot", "value": %q},
  {"op": "add", "path": "/failCgroupV1", "value": false},
  {"op": "add", "path": "/enforceNodeAllocatable", "value": []},
  {"op": "add", "path": "/evictionHard", "value": {}}
]
`
	// everywhere is a DaemonSet that tolerates every taint, as kube-proxy's.
	everywhere = `apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: everywhere
spec:
  selector:
    matchLabels: {app: everywhere}
  template:
    metadata:
      labels: {app: everywhere}
    spec:
      tolerations:
      - operator: Exists
      containers:
      - name: sleeper
        image: registry.k8s.io/pause:3.10.2
`
	workerJoin = `kubeadm join 192.0.2.10:6443 --token "$TOKEN" --discovery-token-ca-cert-hash "$HASH" --node-name worker1 --cri-socket unix:///var/run/containerd/containerd.sock --patches /root/patches`
)

// TestKubeadmWorker is issue 31's step 7: a real kubelet v1.37.2 on
// containerd joins a staticpodd control plane as a worker, and runs a
// Deployment's pod and a DaemonSet's, whose pod for the staticpodd node
// stays Pending with the scheduler's reason.
func TestKubeadmWorker(t *testing.T) {
	kubelet := os.Getenv("STATICPODD_KUBELET")
	if kubelet == "" {
		t.Fatal("STATICPODD_KUBELET is not set: make test-kubeadm builds the kubelet and sets it")
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
	addons := addonImages(t)
	tars = append(tars, addons...)

	start := time.Now()
	cp1 := newMachine(t, bin, "cp1")
	for i, tar := range tars {
		name := fmt.Sprintf("image-%d.tar", i)
		copyFile(t, tar, cp1.Host("/root/"+name))
		cp1.Sh(time.Minute, "staticpodd images import "+name)
	}
	writeFile(t, cp1.Host("/root/kubeadm.yaml"), fmt.Sprintf(kubeadmYAML, cp1.Addr, cp1.Name))
	out, took := timedSh(t, cp1, 6*time.Minute, guideInitLine(), initialized)
	t.Logf("FIGURE staticpodd kubeadm init: %.1fs", took.Seconds())
	waitMirrors(t, cp1, true)

	// The worker: the addons' images and the pause image, which the test's
	// pods run too (a sleeper).
	w := newKubeletMachine(t, bin, kubelet, "worker1", "192.0.2.12", addons, workerCNI)
	writeFile(t, filepath.Join(w.Dir, "net.d", "10-worker.conflist"), fmt.Sprintf(bridgeCNI, filepath.Join(w.Dir, "cni")))
	if err := os.MkdirAll(w.Host("/root/patches"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, w.Host("/root/patches/kubeletconfiguration+json.json"), fmt.Sprintf(workerKubeletPatch, w.Cgroup))
	if err := Connect(cp1, w); err != nil {
		t.Fatal(err)
	}
	join := strings.Fields(cp1.Stdout(time.Minute, guideJoinCommand))
	token, hash := flagValue(join, "--token"), flagValue(join, "--discovery-token-ca-cert-hash")
	if token == "" || hash == "" {
		t.Fatalf("no token or hash in %q", join)
	}
	line := workerJoin + ignoring(kubeletIgnoredPreflight)
	out, took = timedSh(t, w, 5*time.Minute, fmt.Sprintf("export TOKEN=%s HASH=%s; %s", token, hash, line),
		"This node has joined the cluster")
	t.Logf("%s$ %s\n%s", w.Name, line, out)
	t.Logf("FIGURE kubeadm join of the kubelet worker: %.1fs", took.Seconds())
	defer func() {
		// The worker first: its kubelet and containerd remove its pods.
		t.Logf("%s$ %s\n%s", w.Name, guideReset, w.Sh(5*time.Minute, guideReset))
		resetStep(t, cp1)
	}()

	waitOn(t, cp1, 2*time.Minute, `kubectl get node worker1 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}'`, "True")
	t.Logf("FIGURE worker1 Ready %.1fs after the start of the test", time.Since(start).Seconds())

	cp1.Sh(time.Minute, "kubectl create deployment sleeper --image=registry.k8s.io/pause:3.10.2")
	waitOn(t, cp1, 2*time.Minute, `kubectl get pods -l app=sleeper -o jsonpath='{range .items[*]}{.spec.nodeName} {.status.phase}{end}'`, "worker1 Running")

	cp1.Sh(time.Minute, "kubectl apply -f - <<'EOF'\n"+everywhere+"EOF")
	waitOn(t, cp1, 2*time.Minute, `kubectl get pods -l app=everywhere --field-selector spec.nodeName=worker1 -o jsonpath='{.items[*].status.phase}'`, "Running")
	// The DaemonSet's pod for cp1: the DaemonSet controller makes it (it
	// tolerates the taints), the scheduler finds no room on a node whose
	// allocatable pods are its static pods.
	for _, ds := range []string{"app=everywhere", "k8s-app=kube-proxy"} {
		p := daemonPod(t, cp1, ds, "cp1")
		c := podCondition(p, v1.PodScheduled)
		if p.Status.Phase != v1.PodPending || p.Spec.NodeName != "" || c == nil || c.Reason != v1.PodReasonUnschedulable {
			t.Errorf("%s's pod for cp1: phase %s node %q PodScheduled %+v, want Pending and Unschedulable", ds, p.Status.Phase, p.Spec.NodeName, c)
		} else {
			t.Logf("%s's pod for cp1 %s: Pending, PodScheduled False %s: %s", ds, p.Name, c.Reason, c.Message)
		}
	}

	// kube-proxy's pod on the worker: its image here is the test's sleeper
	// under kube-proxy's name, which has no kube-proxy binary: it is
	// started and fails, as the user sees it.
	deadline := time.Now().Add(time.Minute)
	for {
		p := daemonPod(t, cp1, "k8s-app=kube-proxy", "worker1")
		if p.Spec.NodeName == "worker1" && len(p.Status.ContainerStatuses) == 1 {
			s := p.Status.ContainerStatuses[0]
			if s.State.Running != nil || s.State.Terminated != nil || s.LastTerminationState.Terminated != nil ||
				(s.State.Waiting != nil && s.State.Waiting.Reason != "ContainerCreating") {
				st, _ := json.Marshal(s.State)
				t.Logf("kube-proxy's pod on worker1 %s: phase %s, state %s, restarts %d", p.Name, p.Status.Phase, st, s.RestartCount)
				break
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("kube-proxy's pod on worker1 not started after a minute: %+v", p.Status)
			break
		}
		time.Sleep(time.Second)
	}
	t.Logf("%s$ %s\n%s", cp1.Name, guideGetAll, cp1.Sh(time.Minute, guideGetAll))
	t.Logf("FIGURE TestKubeadmWorker up to the reset: %.1fs", time.Since(start).Seconds())
}

// waitOn waits until line, run on m, prints want.
func waitOn(t *testing.T, m *Machine, timeout time.Duration, line, want string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, err := m.ShErr(30*time.Second, line)
		if err == nil && strings.TrimSpace(out) == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s$ %s\n%s (%v), want %q\n%s", m.Name, line, out, err, want, m.Sh(time.Minute, guideGetAll))
		}
		time.Sleep(time.Second)
	}
}

// daemonPod is the pod of the DaemonSet selected by selector (in any
// namespace) for the node: the one its controller pins there with node
// affinity, scheduled or not.
func daemonPod(t *testing.T, m *Machine, selector, node string) *v1.Pod {
	t.Helper()
	var list v1.PodList
	if err := json.Unmarshal([]byte(m.Stdout(time.Minute, "kubectl get pods -A -l "+selector+" -o json")), &list); err != nil {
		t.Fatal(err)
	}
	for i, p := range list.Items {
		if a := p.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
			for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
				for _, f := range term.MatchFields {
					if f.Key == "metadata.name" && len(f.Values) == 1 && f.Values[0] == node {
						return &list.Items[i]
					}
				}
			}
		}
	}
	t.Fatalf("no pod of %s for node %s among %d", selector, node, len(list.Items))
	return nil
}

func podCondition(p *v1.Pod, typ v1.PodConditionType) *v1.PodCondition {
	for i, c := range p.Status.Conditions {
		if c.Type == typ {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}
