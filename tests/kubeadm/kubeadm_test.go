//go:build kubeadm

package kubeadm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/controlplane/cluster"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }

// initialized is the line kubeadm init prints when it is done.
const initialized = "Your Kubernetes control-plane has initialized successfully!"

// TestKubeadm is issue 31's steps 1 to 6 with the real kubeadm v1.37.2 on
// machines of the test's own: the images moved from a "connected" machine
// to an air-gapped one, kubeadm init, the node and its mirror pods, an
// upgrade with a changed extraArgs, and a reset.
func TestKubeadm(t *testing.T) {
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

	// Step 1. The connected machine: the images are pulled
	// (staticpodd images pull, which this offline test replaces by an import
	// of the images it built) and exported in one archive.
	connected := newMachine(t, bin, "connected")
	for i, tar := range tars {
		name := fmt.Sprintf("pulled-%d.tar", i)
		copyFile(t, tar, connected.Host("/root/"+name))
		connected.Sh(time.Minute, "staticpodd images import "+name)
	}
	want := strings.Fields(connected.Stdout(time.Minute, guideImagesList))
	connected.Sh(5*time.Minute, guideImagesExport)

	cp1 := newMachine(t, bin, "cp1")
	copyFile(t, connected.Host("/root/kubeadm-images.tar"), cp1.Host("/root/kubeadm-images.tar"))
	cp1.Sh(5*time.Minute, guideImagesImport)
	ls := cp1.Sh(time.Minute, guideImagesLs)
	for _, ref := range want {
		if !strings.Contains(ls, ref) {
			t.Errorf("image %s missing after the import:\n%s", ref, ls)
		}
	}
	t.Logf("%s$ %s\n%s", cp1.Name, guideImagesLs, ls)

	// Step 2. kubeadm init.
	writeFile(t, cp1.Host("/root/kubeadm.yaml"), fmt.Sprintf(kubeadmYAML, cp1.Addr, cp1.Name))
	initLine := guideInitLine()
	out, took := timedSh(t, cp1, 6*time.Minute, initLine, initialized)
	t.Logf("%s$ %s\n%s", cp1.Name, initLine, out)
	checkIgnored(t, out, ignoredPreflight)
	phases := regexp.MustCompile(`(?m)^\[([a-z-]+)\]`).FindAllStringSubmatch(out, -1)
	seen := map[string]bool{}
	for _, p := range phases {
		seen[p[1]] = true
	}
	for _, p := range []string{"preflight", "certs", "kubeconfig", "etcd", "control-plane", "kubelet-start", "wait-control-plane",
		"upload-config", "mark-control-plane", "bootstrap-token", "addons"} {
		if !seen[p] {
			t.Errorf("kubeadm init ran no phase %s", p)
		}
	}
	t.Logf("FIGURE kubeadm init wall time (start to %q): %.1fs; preflight errors ignored: %d (%s); phases skipped: 0",
		initialized, took.Seconds(), len(ignoredPreflight), strings.Join(ignoredPreflight, ","))

	for _, f := range []string{"/var/lib/kubelet/kubeadm-flags.env", "/var/lib/kubelet/instance-config.yaml"} {
		b, _ := os.ReadFile(cp1.Host(f))
		t.Logf("what kubeadm wrote for the kubelet, %s:\n%s", f, b)
	}

	// Step 3. The node and the four mirror pods, with the kubelet's
	// annotations.
	node, mirrors := waitMirrors(t, cp1, true)
	t.Logf("%s$ %s\n%s", cp1.Name, guideGetAll, cp1.Sh(time.Minute, guideGetAll))
	t.Logf("%s$ %s\n%s", cp1.Name, guidePs, cp1.Sh(time.Minute, guidePs))
	// Troubleshooting as kubeadm's pages do it: crictl on the CRI socket,
	// with the staticpodd-kubeadm package's /etc/crictl.yaml.
	for _, line := range []string{guideCrictlPods, guideCrictlPs, guideCrictlImages, guideCrictlLogs} {
		out := cp1.Sh(time.Minute, line)
		t.Logf("%s$ %s\n%s", cp1.Name, line, out)
		if line != guideCrictlLogs && !strings.Contains(out, "kube-apiserver") {
			t.Errorf("%s shows no kube-apiserver", line)
		}
	}
	if !slices.ContainsFunc(node.Spec.Taints, func(tn v1.Taint) bool { return tn.Key == "node-role.kubernetes.io/control-plane" }) {
		t.Errorf("node %s: no control-plane taint (mark-control-plane): %v", node.Name, node.Spec.Taints)
	}
	var stack int64
	procs, err := cp1.Procs()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range procs {
		// The node agent: staticpodd as kubelet, and its containers' monitors.
		if p.Comm == "kubelet" || p.Comm == "staticpodd" || p.Comm == "staticpodd-moni" {
			stack += p.RSS
			names = append(names, fmt.Sprintf("%s %d MiB", p.Comm, p.RSS>>20))
		}
	}
	t.Logf("FIGURE node agent RSS after init: %.1f MiB (%s)", float64(stack)/(1<<20), strings.Join(names, ", "))

	// docs/guides/prometheus.md, on this node; docs/guides/mirror-pods.md,
	// an appliance reporting to it.
	prometheusSteps(t, cp1)
	mirrorGuideSteps(t, bin, cp1)

	// Step 7's decision: a pod the API server binds to a staticpodd node is
	// failed with a reason, as the kubelet fails a pod it cannot admit.
	cp1.Sh(time.Minute, `kubectl run bound --image=registry.k8s.io/pause:3.10.2 --overrides='{"spec":{"nodeName":"cp1"}}'`)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out := cp1.Stdout(time.Minute, "kubectl get pod bound -o jsonpath='{.status.phase} {.status.reason}'")
		if out == "Failed StaticPodsOnly" {
			t.Logf("a pod bound to cp1 through the API: %s", out)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a pod bound to cp1 through the API is %q, want Failed StaticPodsOnly", out)
		}
		time.Sleep(time.Second)
	}

	// Step 4. A second control-plane node joins with the bootstrap token:
	// the certificates uploaded, the join command printed on cp1, and run
	// on cp2, which TLS-bootstraps its client certificate and joins etcd.
	cp2 := newMachineAt(t, bin, "cp2", "192.0.2.11")
	if err := Connect(cp1, cp2); err != nil {
		t.Fatal(err)
	}
	copyFile(t, connected.Host("/root/kubeadm-images.tar"), cp2.Host("/root/kubeadm-images.tar"))
	cp2.Sh(5*time.Minute, guideImagesImport)
	out = cp1.Sh(time.Minute, guideUploadCerts)
	t.Logf("%s$ %s\n%s", cp1.Name, guideUploadCerts, out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	key := strings.TrimSpace(lines[len(lines)-1])
	join := strings.Fields(cp1.Stdout(time.Minute, guideJoinCommand))
	token, hash := flagValue(join, "--token"), flagValue(join, "--discovery-token-ca-cert-hash")
	if token == "" || hash == "" || len(key) != 64 {
		t.Fatalf("no token, hash or certificate key: %q %q %q", join, hash, key)
	}
	joinLine := guideJoinLine()
	out, took = timedSh(t, cp2, 8*time.Minute, fmt.Sprintf("export TOKEN=%s HASH=%s KEY=%s; %s", token, hash, key, joinLine),
		"This node has joined the cluster and a new control plane instance was created")
	t.Logf("%s$ %s\n%s", cp2.Name, joinLine, out)
	checkIgnored(t, out, ignoredPreflight)
	t.Logf("FIGURE kubeadm join --control-plane: %.1fs", took.Seconds())
	waitMirrors(t, cp2, true)
	if pem, err := os.Readlink(cp2.Host("/var/lib/kubelet/pki/kubelet-client-current.pem")); err != nil {
		t.Errorf("cp2 has no TLS-bootstrapped client certificate: %v", err)
	} else {
		t.Logf("cp2's client certificate, from its CSR: %s", pem)
	}
	t.Logf("%s$ %s\n%s", cp1.Name, guideGetAll, cp1.Sh(time.Minute, guideGetAll))

	// Step 5. upgrade apply to the same version with an extraArgs changed
	// in the cluster's configuration: kubeadm re-renders kube-apiserver's
	// manifest and waits for its mirror pod's config.hash to change.
	before := mirrors["kube-apiserver"].Annotations["kubernetes.io/config.hash"]
	// The operator edits with their editor; the test's is sed.
	edit := `KUBE_EDITOR='sed -i "s/^    apiServer: {}/    apiServer:\n      extraArgs:\n      - name: event-ttl\n        value: 2h0m0s/"' ` + guideEditConfig
	cp1.Sh(time.Minute, edit)
	upgradeLine := guideUpgradeLine()
	out, took = timedSh(t, cp1, 10*time.Minute, upgradeLine, "[upgrade] SUCCESS!")
	t.Logf("%s$ %s\n%s", cp1.Name, upgradeLine, out)
	checkIgnored(t, out, ignoredUpgradePreflight)
	if !strings.Contains(out, `Component "kube-apiserver" upgraded successfully!`) {
		t.Errorf("kubeadm upgrade apply did not wait for kube-apiserver's new pod")
	}
	_, mirrors = waitMirrors(t, cp1, true)
	after := mirrors["kube-apiserver"].Annotations["kubernetes.io/config.hash"]
	if after == before {
		t.Errorf("kube-apiserver's config.hash is still %s after the upgrade", before)
	}
	if args := strings.Join(mirrors["kube-apiserver"].Spec.Containers[0].Command, " "); !strings.Contains(args, "--event-ttl=2h0m0s") {
		t.Errorf("kube-apiserver's mirror pod runs %s, without the new --event-ttl", args)
	}
	t.Logf("FIGURE kubeadm upgrade apply: %.1fs (config.hash of kube-apiserver %s -> %s)", took.Seconds(), before, after)

	// Issue 28's scenario: a bad edit of kube-apiserver.yaml rolled back.
	rollbackSteps(t, cp1)

	// Step 6. reset, the joined node first (its etcd member goes).
	resetStep(t, cp2)
	resetStep(t, cp1)
}

// addonImages are the images kubeadm names that no static pod runs (the
// addons' and the pause image): busybox under their names, for the
// preflight's image presence check. They never run on a staticpodd node;
// containerd runs the pause image as its sandboxes' (a sleeper, as the real
// one).
func addonImages(t *testing.T) []string {
	var tars []string
	for _, ref := range []string{"registry.k8s.io/kube-proxy:v1.37.2", "registry.k8s.io/coredns/coredns:v1.14.6", "registry.k8s.io/pause:3.10.2"} {
		tar := filepath.Join(t.TempDir(), "image.tar")
		args := []string{"-ref", ref}
		if strings.Contains(ref, "/pause:") {
			args = append(args, "-cmd", `["sh","-c","trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"]`)
		}
		testdaemon.BuildImage(t, tar, args...)
		tars = append(tars, tar)
	}
	return tars
}

// newMachine is a machine named name in a network namespace of its own
// holding cluster.Address, with staticpodd as its node agent.
func newMachine(t *testing.T, bin, name string) *Machine {
	t.Helper()
	return newMachineAt(t, bin, name, cluster.Address)
}

// newMachineAt is newMachine with the address addr.
func newMachineAt(t *testing.T, bin, name, addr string) *Machine {
	t.Helper()
	crictl := os.Getenv("CRICTL")
	if crictl == "" {
		t.Fatal("CRICTL is not set: make test-kubeadm builds crictl (tests/crictl/build.sh) and sets it")
	}
	ns, err := cluster.NewNetnsAt("staticpodd-kubeadm-"+testdaemon.RandHex(4), addr)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMachine(t, name, addr, ns, bin, testdaemon.Bin, testdaemon.Bin, crictl)
	unit, err := UnitExecStart("../../packaging/kubeadm/10-kubeadm.conf")
	if err != nil {
		t.Fatal(err)
	}
	// Each machine's pods under a cgroupRoot of its own, as machines here
	// share one host's cgroups: the flag in KUBELET_EXTRA_ARGS, as the
	// package's /etc/default/kubelet would give it (the machines share the
	// host's /etc, which has none).
	m.SetExecStart(strings.Replace(unit, "exec ", "KUBELET_EXTRA_ARGS=--cgroup-root="+m.Cgroup+"\nexec ", 1))
	// The machine boots with the package's staticpodd-cri.socket listening
	// (enabled, WantedBy=sockets.target); kubelet.service is not running.
	m.Sh(time.Minute, "systemctl start staticpodd-cri.socket")
	return m
}

// timedSh runs line on m and returns its output and how long it took until
// it printed a line holding mark; the command must succeed.
func timedSh(t *testing.T, m *Machine, timeout time.Duration, line, mark string) (string, time.Duration) {
	t.Helper()
	ctx, cancel := contextTimeout(timeout)
	defer cancel()
	cmd := m.Command(ctx, "sh", "-c", line+" 2>&1")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	var took time.Duration
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		if took == 0 && strings.Contains(sc.Text(), mark) {
			took = time.Since(start)
		}
		out.WriteString(sc.Text() + "\n")
	}
	io.Copy(io.Discard, stdout)
	if err := cmd.Wait(); err != nil || took == 0 {
		t.Fatalf("%s$ %s: %v (printed %q: %v)\n%s\n%s", m.Name, line, err, mark, took != 0, out.String(), m.Log())
	}
	return out.String(), took
}

// flagValue is the word after flag in args, "" if none.
func flagValue(args []string, flag string) string {
	for i, a := range args[:len(args)-1] {
		if a == flag {
			return args[i+1]
		}
	}
	return ""
}

// checkIgnored fails the test for an ignored preflight error that did not
// fire: it must leave the list.
func checkIgnored(t *testing.T, out string, ignored []string) {
	t.Helper()
	for _, name := range ignored {
		if !strings.Contains(out, "[WARNING "+name+"]") {
			t.Errorf("preflight check %s passes now: remove it from the ignored errors (and the guide)", name)
		}
	}
}

// waitMirrors waits until m's Node is there (and Ready, if ready) and the
// four control-plane pods have mirror pods as the kubelet makes them, and
// returns them by component name.
func waitMirrors(t *testing.T, m *Machine, ready bool) (*v1.Node, map[string]v1.Pod) {
	t.Helper()
	var node v1.Node
	var mirrors map[string]v1.Pod
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := func() error {
			out, err := m.ShErr(30*time.Second, "kubectl get node "+m.Name+" -o json")
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			if err := json.Unmarshal([]byte(out), &node); err != nil {
				return err
			}
			if ready && !conditionTrue(node.Status.Conditions, v1.NodeReady) {
				return fmt.Errorf("node %s not Ready: %v", m.Name, node.Status.Conditions)
			}
			out, err = m.ShErr(30*time.Second, "kubectl -n kube-system get pods -o json")
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			var list v1.PodList
			if err := json.Unmarshal([]byte(out), &list); err != nil {
				return err
			}
			mirrors = map[string]v1.Pod{}
			var errs []string
			for _, c := range cluster.Components {
				i := slices.IndexFunc(list.Items, func(p v1.Pod) bool { return p.Name == c.Name+"-"+m.Name })
				if i < 0 {
					errs = append(errs, "no mirror pod "+c.Name+"-"+m.Name)
					continue
				}
				p := list.Items[i]
				mirrors[c.Name] = p
				if err := checkMirror(&node, &p); err != nil {
					errs = append(errs, err.Error())
				}
			}
			if len(errs) > 0 {
				return fmt.Errorf("%s", strings.Join(errs, "; "))
			}
			return nil
		}()
		if err == nil {
			return &node, mirrors
		}
		if time.Now().After(deadline) {
			t.Fatalf("node and mirror pods: %v\n%s", err, m.Log())
		}
		time.Sleep(time.Second)
	}
}

// checkMirror: a mirror pod as the kubelet makes one, Running and Ready.
func checkMirror(node *v1.Node, p *v1.Pod) error {
	a := p.Annotations
	var errs []string
	if a["kubernetes.io/config.hash"] == "" || a["kubernetes.io/config.mirror"] != a["kubernetes.io/config.hash"] {
		errs = append(errs, fmt.Sprintf("config.mirror %q, config.hash %q", a["kubernetes.io/config.mirror"], a["kubernetes.io/config.hash"]))
	}
	if a["kubernetes.io/config.source"] != "file" || a["kubernetes.io/config.seen"] == "" {
		errs = append(errs, fmt.Sprintf("config.source %q config.seen %q", a["kubernetes.io/config.source"], a["kubernetes.io/config.seen"]))
	}
	if refs := p.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].UID != node.UID {
		errs = append(errs, fmt.Sprintf("ownerReferences %v, want Node %s", refs, node.UID))
	}
	if p.Spec.NodeName != node.Name || p.Status.Phase != v1.PodRunning || !podConditionTrue(p.Status.Conditions, v1.PodReady) {
		errs = append(errs, fmt.Sprintf("node %q phase %s conditions %v", p.Spec.NodeName, p.Status.Phase, p.Status.Conditions))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s: %s", p.Name, strings.Join(errs, ", "))
	}
	return nil
}

func conditionTrue(cs []v1.NodeCondition, typ v1.NodeConditionType) bool {
	return slices.ContainsFunc(cs, func(c v1.NodeCondition) bool { return c.Type == typ && c.Status == v1.ConditionTrue })
}

func podConditionTrue(cs []v1.PodCondition, typ v1.PodConditionType) bool {
	return slices.ContainsFunc(cs, func(c v1.PodCondition) bool { return c.Type == typ && c.Status == v1.ConditionTrue })
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// copyFile is the operator's removable disk between two machines.
func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := Link(from, to); err != nil {
		t.Fatalf("copy %s to %s: %v", from, to, err)
	}
}

// resetStep is kubeadm reset -f on m, then what must be left of staticpodd:
// nothing.
func resetStep(t *testing.T, m *Machine) {
	t.Helper()
	// kubeadm reset stops kubelet.service, then stops and removes every pod
	// through the CRI: staticpodd-cri.socket, still listening, starts
	// kubelet.service for that call, and the daemon stops and removes them.
	start := time.Now()
	t.Logf("%s$ %s\n%s", m.Name, guideReset, m.Sh(5*time.Minute, guideReset))
	// kubeadm gives each StopPodSandbox 2 s, 5 times: a container that
	// outlives that goes on stopping within its grace period (kube-apiserver's
	// terminationGracePeriodSeconds, 30 s) after reset has returned, and is
	// then removed, its manifest gone.
	// A pod is gone once its state is and its processes (the containers,
	// their monitors, which exit after they recorded the exit) have ended.
	agent := m.AgentPID()
	others := func() []string {
		var left []string
		procs, err := m.Procs()
		if err != nil {
			t.Fatal(err)
		}
		// The node agent the socket started stays, as containerd does after
		// a reset on the kubelet's nodes; nothing of its pods may.
		for _, p := range procs {
			if p.PID == agent {
				continue
			}
			// A process that has exited and waits for its parent to reap
			// it is not left running: a monitor orphaned when the daemon
			// it served was stopped is reaped by PID 1, which under
			// systemd does at once and in this test's sandbox may not.
			if st, ppid := procState(p.PID); st == "Z" {
				t.Logf("%s: process %d %s has exited, not reaped yet by its parent %d", m.Name, p.PID, p.Comm, ppid)
				continue
			}
			left = append(left, fmt.Sprintf("process %d %s: %s", p.PID, p.Comm, cmdline(p.PID)))
		}
		return left
	}
	deadline := time.Now().Add(45 * time.Second)
	for {
		pods, _ := os.ReadDir(m.Host("/run/staticpodd/pods"))
		if len(pods) == 0 && len(others()) == 0 {
			break
		}
		if time.Now().After(deadline) {
			if len(pods) > 0 {
				t.Errorf("%s: %d pods still there 45 s after kubeadm reset", m.Name, len(pods))
			}
			break // processes left are reported below
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("FIGURE %s: kubeadm reset to no pod left: %.1fs", m.Name, time.Since(start).Seconds())
	left := others()
	mounts := m.Sh(time.Minute, "cat /proc/self/mountinfo")
	for _, line := range strings.Split(mounts, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || slices.Contains(MachinePaths, f[4]) {
			continue
		}
		for _, p := range MachinePaths {
			if strings.HasPrefix(f[4], p+"/") {
				left = append(left, "mount "+f[4])
			}
		}
	}
	for _, dir := range m.CgroupDirs() {
		for _, sub := range globDirs(dir + "/*") {
			left = append(left, "cgroup "+sub)
		}
	}
	// Not /var/lib/etcd: kubeadm reset empties it before it stops the
	// kubelet and the pods, under the kubelet and containerd too, and etcd,
	// still running in between, may write its member directory again. That
	// is etcd's data and kubeadm's order, not staticpodd's state.
	for _, dir := range []string{"/run/staticpodd/pods", "/run/staticpodd/containers", "/run/staticpodd/libcontainer",
		"/var/lib/staticpodd/pods", "/var/log/pods", "/etc/kubernetes/manifests"} {
		ents, _ := os.ReadDir(m.Host(dir))
		for _, e := range ents {
			left = append(left, "state "+filepath.Join(dir, e.Name()))
		}
	}
	for _, table := range []string{"filter", "nat", "mangle", "raw"} {
		for _, line := range strings.Split(m.Sh(time.Minute, "iptables-save -t "+table), "\n") {
			if strings.HasPrefix(line, "-A ") {
				left = append(left, "iptables "+table+": "+line)
			}
		}
	}
	if len(left) > 0 {
		t.Errorf("left on %s after kubeadm reset:\n%s", m.Name, strings.Join(left, "\n"))
	}
}

func contextTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// procState is the state letter of process pid (R, S, Z, ...) and its
// parent's pid, from /proc/<pid>/stat; "" once it is gone.
func procState(pid int) (string, int) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", 0
	}
	// pid (comm) state ppid ...: comm may hold spaces and parentheses.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 2 {
		return "", 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return f[0], ppid
}

// cmdline is process pid's arguments, as ps prints them: a monitor's name
// its container's ID.
func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.Join(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"), " ")
}
