//go:build controlplane

// Package controlplane bootstraps a real kubeadm control plane (etcd,
// kube-apiserver, kube-controller-manager, kube-scheduler v1.37.2) under
// staticpodd, air-gapped, from kubeadm's own certificates, kubeconfigs and
// manifests, and checks what the kubelet would give: the four pods Running and
// Ready through their own HTTPS probes, their mirror pods and the Node on the
// API server they run, and that neither an API server killed nor staticpodd
// killed costs anything.
//
// It needs the binaries tests/controlplane/build.sh builds (about 15 minutes
// the first time), so it is behind the build tag controlplane: make
// test-controlplane builds them and runs it.
package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	v1 "k8s.io/api/core/v1"
	statsapi "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/staticpodd/staticpodd/tests/controlplane/cluster"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }

// controlPlane is a daemon running kubeadm's control plane in a network
// namespace of its own.
type controlPlane struct {
	t    *testing.T
	d    *testdaemon.Daemon
	cl   *cluster.Cluster
	ns   *cluster.Netns
	keys *credentialKeys
	// signed are the images the control plane runs, as signed for the
	// policy it runs under, by component name.
	signed map[string]signedImage
}

// start generates the control plane's files with kubeadm, imports its images
// signed, under an image policy that requires the signature (importSigned),
// and starts staticpodd on its manifests, with kubeadm's kubelet.conf as its
// credentials, in a network namespace that holds cluster.Address. The API
// server and the controller manager read their private keys from Secrets
// whose values are credentials (keysFromCredentials): the keys are in no
// file of the pki.
func start(t *testing.T) *controlPlane {
	t.Helper()
	bin, err := cluster.BinDir()
	if err != nil {
		t.Fatal(err)
	}
	root, err := testdaemon.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	tars, err := cluster.OCIImages(root, bin)
	if err != nil {
		t.Fatal(err)
	}
	ns, err := cluster.NewNetns("staticpodd-cp-" + testdaemon.RandHex(4))
	if err != nil {
		t.Fatal(err)
	}
	// Registered before the daemon's cleanup, so it runs after it: the
	// namespace goes once the daemon and its pods are gone.
	t.Cleanup(func() {
		if procs, err := ns.Procs(); err != nil || len(procs) > 0 {
			t.Errorf("control-plane processes left once every pod is gone: %v %v", procs, err)
		}
		if err := ns.Close(); err != nil {
			t.Error(err)
		}
	})
	d := testdaemon.New(t)
	d.Wrap = ns.Wrap()
	d.SocketOnly = true // the read-only port listens in the namespace
	cl, err := cluster.Generate(context.Background(), bin, t.TempDir(), d.Name, ns)
	if err != nil {
		t.Fatal(err)
	}
	keys := keysFromCredentials(t, cl)
	d.Args = append(d.Args, "--node-ip", cluster.Address, "--kubeconfig", cl.Kubeconfig("kubelet"),
		"--credentials-directory", keys.Dir)
	// The node API on the node's address, trusting kubeadm's CA, which
	// signed kube-apiserver's kubelet client certificate; authorization by
	// SubjectAccessReview, the kubelet's default.
	cfg, err := os.ReadFile(d.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "address: 127.0.0.1\n", "address: "+cluster.Address+"\n", 1) +
		fmt.Sprintf("authentication: {x509: {clientCAFile: %s}}\n", filepath.Join(cl.PKI, "ca.crt")))
	if err := os.WriteFile(d.Config, cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	signed := importSigned(t, d, tars)
	// The Secrets before the pods that use them.
	for file, content := range keys.Secrets {
		d.WriteManifest(file, content)
	}
	for _, c := range cluster.Components {
		b, err := os.ReadFile(cl.Manifest(c.Name))
		if err != nil {
			t.Fatal(err)
		}
		d.WriteManifest(c.Name+".yaml", string(b))
	}
	d.Start()
	return &controlPlane{t: t, d: d, cl: cl, ns: ns, keys: keys, signed: signed}
}

// step runs one part of the test, on the test's goroutine (the daemon's
// Eventually fails the test it was made for), logging its name and time.
func (cp *controlPlane) step(name string, f func()) {
	cp.t.Helper()
	start := time.Now()
	cp.t.Logf("--- %s", name)
	f()
	cp.t.Logf("--- %s done in %.1fs", name, time.Since(start).Seconds())
}

// eventually is Daemon.Eventually, and logs how long what took.
func (cp *controlPlane) eventually(timeout time.Duration, what string, f func() error) {
	cp.t.Helper()
	start := time.Now()
	cp.d.Eventually(timeout, what, f)
	cp.t.Logf("%s: %.1fs", what, time.Since(start).Seconds())
}

// kubectl runs kubectl with admin.conf and returns its output.
func (cp *controlPlane) kubectl(args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return cp.cl.Kubectl(ctx, "admin", args...)
}

// mirrors returns the pods in kube-system, by name.
func (cp *controlPlane) mirrors() (map[string]v1.Pod, error) {
	out, err := cp.kubectl("get", "pods", "-n", "kube-system", "-o", "json")
	if err != nil {
		return nil, err
	}
	var list v1.PodList
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("decode kubectl get pods: %w", err)
	}
	pods := map[string]v1.Pod{}
	for _, p := range list.Items {
		pods[p.Name] = p
	}
	return pods, nil
}

// node returns this node as the API server has it.
func (cp *controlPlane) node() (*v1.Node, error) {
	out, err := cp.kubectl("get", "node", cp.d.Name, "-o", "json")
	if err != nil {
		return nil, err
	}
	var n v1.Node
	if err := json.Unmarshal(out, &n); err != nil {
		return nil, fmt.Errorf("decode kubectl get node: %w", err)
	}
	return &n, nil
}

// local returns the static pods as staticpodd has them, by component name.
func (cp *controlPlane) local() map[string]v1.Pod {
	pods := map[string]v1.Pod{}
	for _, p := range cp.d.Pods() {
		pods[strings.TrimSuffix(p.Name, "-"+cp.d.Name)] = p
	}
	return pods
}

func podReady(p *v1.Pod) error {
	if p.Status.Phase != v1.PodRunning {
		return fmt.Errorf("%s: phase %q", p.Name, p.Status.Phase)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodReady {
			if c.Status != v1.ConditionTrue {
				return fmt.Errorf("%s: Ready %s: %s %s", p.Name, c.Status, c.Reason, c.Message)
			}
			return nil
		}
	}
	return fmt.Errorf("%s: no Ready condition", p.Name)
}

// waitLocalReady waits until staticpodd reports all four pods Running and
// Ready, and returns them.
func (cp *controlPlane) waitLocalReady(timeout time.Duration, what string) map[string]v1.Pod {
	cp.t.Helper()
	var pods map[string]v1.Pod
	cp.eventually(timeout, what, func() error {
		pods = cp.local()
		for _, c := range cluster.Components {
			p, ok := pods[c.Name]
			if !ok {
				return fmt.Errorf("no pod %s", c.Name)
			}
			if err := podReady(&p); err != nil {
				return err
			}
		}
		return nil
	})
	return pods
}

// checkMirror checks that mirror is the mirror pod of the static pod local,
// as the kubelet makes one: same name and node, the config.mirror annotation
// set to the config hash, one controller reference to the Node, and the
// static pod's status.
func checkMirror(node *v1.Node, local, mirror v1.Pod) error {
	hash := local.Annotations["kubernetes.io/config.hash"]
	var errs []string
	if hash == "" {
		errs = append(errs, "the static pod has no config.hash")
	}
	if got := mirror.Annotations["kubernetes.io/config.mirror"]; got != hash {
		errs = append(errs, fmt.Sprintf("config.mirror %q, want %q", got, hash))
	}
	for _, k := range []string{"kubernetes.io/config.hash", "kubernetes.io/config.source"} {
		if mirror.Annotations[k] != local.Annotations[k] {
			errs = append(errs, fmt.Sprintf("%s %q, static pod's %q", k, mirror.Annotations[k], local.Annotations[k]))
		}
	}
	if mirror.Spec.NodeName != node.Name {
		errs = append(errs, fmt.Sprintf("nodeName %q", mirror.Spec.NodeName))
	}
	if refs := mirror.OwnerReferences; len(refs) != 1 || refs[0].Kind != "Node" || refs[0].APIVersion != "v1" ||
		refs[0].Name != node.Name || refs[0].UID != node.UID || refs[0].Controller == nil || !*refs[0].Controller {
		errs = append(errs, fmt.Sprintf("ownerReferences %+v, want the controller reference to Node %s (%s)", refs, node.Name, node.UID))
	}
	if err := podReady(&mirror); err != nil {
		errs = append(errs, err.Error())
	}
	if mirror.Status.PodIP != cluster.Address || mirror.Status.HostIP != cluster.Address {
		errs = append(errs, fmt.Sprintf("podIP %q hostIP %q, want %s", mirror.Status.PodIP, mirror.Status.HostIP, cluster.Address))
	}
	if mirror.Status.StartTime == nil {
		errs = append(errs, "no startTime")
	}
	if len(mirror.Status.ContainerStatuses) != len(local.Status.ContainerStatuses) {
		errs = append(errs, fmt.Sprintf("%d container statuses, static pod has %d", len(mirror.Status.ContainerStatuses), len(local.Status.ContainerStatuses)))
	} else {
		for i, cs := range mirror.Status.ContainerStatuses {
			l := local.Status.ContainerStatuses[i]
			if cs.Name != l.Name || cs.ContainerID != l.ContainerID || cs.RestartCount != l.RestartCount || cs.Ready != l.Ready || cs.State.Running == nil {
				errs = append(errs, fmt.Sprintf("container %s: id %s restarts %d ready %v running %v; static pod: %s %s %d %v",
					cs.Name, cs.ContainerID, cs.RestartCount, cs.Ready, cs.State.Running != nil, l.Name, l.ContainerID, l.RestartCount, l.Ready))
			}
		}
	}
	if mirror.Status.QOSClass != local.Status.QOSClass {
		errs = append(errs, fmt.Sprintf("qosClass %q, static pod's %q", mirror.Status.QOSClass, local.Status.QOSClass))
	}
	if len(errs) > 0 {
		return fmt.Errorf("mirror pod %s: %s", mirror.Name, strings.Join(errs, "; "))
	}
	return nil
}

// waitMirrors waits until every static pod has its mirror pod, matching it,
// and returns the mirrors by component name.
func (cp *controlPlane) waitMirrors(timeout time.Duration, what string) map[string]v1.Pod {
	cp.t.Helper()
	var got map[string]v1.Pod
	cp.eventually(timeout, what, func() error {
		node, err := cp.node()
		if err != nil {
			return err
		}
		mirrors, err := cp.mirrors()
		if err != nil {
			return err
		}
		local := cp.local()
		got = map[string]v1.Pod{}
		for _, c := range cluster.Components {
			l, ok := local[c.Name]
			if !ok {
				return fmt.Errorf("no static pod %s", c.Name)
			}
			m, ok := mirrors[l.Name]
			if !ok {
				return fmt.Errorf("no mirror pod %s", l.Name)
			}
			if err := checkMirror(node, l, m); err != nil {
				return err
			}
			got[c.Name] = m
		}
		return nil
	})
	return got
}

// pids returns the control plane's processes by component name.
func (cp *controlPlane) pids() map[string]cluster.Proc {
	cp.t.Helper()
	procs, err := cp.ns.Procs()
	if err != nil {
		cp.t.Fatal(err)
	}
	byName := map[string]cluster.Proc{}
	for _, c := range cluster.Components {
		if p, ok := procs[c.Comm]; ok {
			byName[c.Name] = p
		}
	}
	return byName
}

func TestControlPlane(t *testing.T) {
	cp := start(t)
	d := cp.d

	// The four pods are Running and Ready: etcd's probes on its plain-HTTP
	// metrics port, the others' over HTTPS to their named probe-port.
	local := cp.waitLocalReady(4*time.Minute, "the control plane's four pods Ready")
	for _, c := range cluster.Components {
		if local[c.Name].Namespace != "kube-system" {
			t.Errorf("%s: namespace %q", c.Name, local[c.Name].Namespace)
		}
	}
	if got := cp.pids(); len(got) != len(cluster.Components) {
		t.Fatalf("control-plane processes in the namespace: %v", got)
	}
	cp.checkProbes(local)
	cp.step("ImagesVerified", func() {
		cp.checkVerified(local)
	})

	// admin.conf's group is bound to cluster-admin as kubeadm init does it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cp.eventually(time.Minute, "kubeadm:cluster-admins bound with super-admin.conf", func() error {
		return cp.cl.BindClusterAdmins(ctx)
	})
	if out, err := cp.kubectl("get", "--raw", "/readyz"); err != nil || string(out) != "ok" {
		t.Fatalf("/readyz: %q, %v", out, err)
	}

	cp.step("NodeReady", func() {
		cp.eventually(time.Minute, "the Node Ready", func() error {
			n, err := cp.node()
			if err != nil {
				return err
			}
			for _, c := range n.Status.Conditions {
				if c.Type == v1.NodeReady {
					if c.Status != v1.ConditionTrue {
						return fmt.Errorf("Ready %s: %s", c.Status, c.Message)
					}
					return checkNode(n)
				}
			}
			return fmt.Errorf("no Ready condition: %+v", n.Status.Conditions)
		})
	})

	mirrors := cp.waitMirrors(time.Minute, "the four mirror pods")
	first := mirrors["kube-apiserver"].UID

	cp.step("KeysFromCredentials", func() {
		// The API server serves with the key of its Secret: kubectl
		// verified its certificate above (/readyz), and apiserver.key is
		// nowhere else; it signs tokens with the sa.key of its Secret.
		for component := range keyFlags {
			cp.checkKeysFromSecret(component, local[component], mirrors[component])
		}
		cp.checkServiceAccountToken()
	})

	cp.step("NodeAPIThroughTheAPIServer", func() {
		cp.checkNodeAPI(local)
	})

	cp.step("MirrorDeletedComesBack", func() {
		before := cp.pids()
		name := local["kube-controller-manager"].Name
		if _, err := cp.kubectl("delete", "pod", "-n", "kube-system", name, "--wait=false"); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		cp.eventually(10*time.Second, "the deleted mirror pod back", func() error {
			m, err := cp.mirrors()
			if err != nil {
				return err
			}
			p, ok := m[name]
			if !ok || p.UID == mirrors["kube-controller-manager"].UID || p.DeletionTimestamp != nil {
				return fmt.Errorf("not back yet")
			}
			return nil
		})
		if took := time.Since(deleted); took > 2*time.Second {
			t.Errorf("the mirror pod came back %v after its deletion, want within 2s", took)
		}
		if after := cp.pids(); after["kube-controller-manager"] != before["kube-controller-manager"] {
			t.Errorf("deleting the mirror pod touched the container: %+v, then %+v", before, after)
		}
		mirrors = cp.waitMirrors(time.Minute, "the mirror pods after the deletion")
	})

	cp.step("SchedulerManifestEdited", func() {
		old := local["kube-scheduler"]
		oldProc := cp.pids()["kube-scheduler"]
		b, err := os.ReadFile(cp.cl.Manifest("kube-scheduler"))
		if err != nil {
			t.Fatal(err)
		}
		// One more flag, as an operator raising its log level would.
		edited := strings.Replace(string(b), "    - --leader-elect=true\n", "    - --leader-elect=true\n    - --v=2\n", 1)
		if edited == string(b) {
			t.Fatalf("kubeadm's scheduler manifest has no --leader-elect=true line:\n%s", b)
		}
		d.WriteManifest("kube-scheduler.yaml", edited)
		var now v1.Pod
		cp.eventually(2*time.Minute, "the edited scheduler Ready", func() error {
			now = cp.local()["kube-scheduler"]
			if now.UID == old.UID {
				return fmt.Errorf("still the old generation %s", old.UID)
			}
			return podReady(&now)
		})
		if testdaemon.ProcAlive(oldProc.PID) {
			t.Errorf("the old scheduler (pid %d) still runs beside the new one", oldProc.PID)
		}
		m := cp.waitMirrors(time.Minute, "the edited scheduler's mirror")
		if m["kube-scheduler"].UID == mirrors["kube-scheduler"].UID {
			t.Errorf("the scheduler's mirror pod was not replaced (UID %s)", m["kube-scheduler"].UID)
		}
		if got := m["kube-scheduler"].Annotations["kubernetes.io/config.mirror"]; got != now.Annotations["kubernetes.io/config.hash"] || got == old.Annotations["kubernetes.io/config.hash"] {
			t.Errorf("the new mirror's config.mirror %q; old hash %q, new %q", got, old.Annotations["kubernetes.io/config.hash"], now.Annotations["kubernetes.io/config.hash"])
		}
		if cmd := m["kube-scheduler"].Spec.Containers[0].Command; !strings.Contains(strings.Join(cmd, " "), "--v=2") {
			t.Errorf("the new mirror's command %q lacks the edit", cmd)
		}
		mirrors = m
		local = cp.local()
	})

	cp.step("APIServerManifestBroken", func() {
		// An edit that breaks kube-apiserver's manifest keeps the last good
		// pod: the same process, the same mirror pod, and a problem that
		// names the file; the good content back changes nothing.
		before := cp.pids()["kube-apiserver"]
		uid := local["kube-apiserver"].UID
		good, err := os.ReadFile(cp.cl.Manifest("kube-apiserver"))
		if err != nil {
			t.Fatal(err)
		}
		d.WriteManifest("kube-apiserver.yaml", string(good)+"  hostNetwork: [unterminated\n")
		file := filepath.Join(d.Manifests, "kube-apiserver.yaml")
		cp.eventually(30*time.Second, "the broken manifest reported", func() error {
			if out := d.CLI("ps"); !strings.Contains(out, "Manifest problems:") || !strings.Contains(out, file) {
				return fmt.Errorf("ps:\n%s", out)
			}
			return nil
		})
		m, err := cp.mirrors()
		if err != nil {
			t.Fatal(err)
		}
		if p := m[local["kube-apiserver"].Name]; p.UID != mirrors["kube-apiserver"].UID {
			t.Errorf("the API server's mirror pod changed with its manifest broken: UID %s, was %s", p.UID, mirrors["kube-apiserver"].UID)
		}
		d.WriteManifest("kube-apiserver.yaml", string(good))
		cp.eventually(30*time.Second, "the problem gone with the good manifest back", func() error {
			if out := d.CLI("ps"); strings.Contains(out, "Manifest problems:") {
				return fmt.Errorf("ps:\n%s", out)
			}
			return nil
		})
		p := cp.local()["kube-apiserver"]
		if p.UID != uid || podReady(&p) != nil {
			t.Errorf("kube-apiserver after its manifest was broken and mended: UID %s (was %s), %v", p.UID, uid, podReady(&p))
		}
		if after := cp.pids()["kube-apiserver"]; after != before {
			t.Errorf("kube-apiserver restarted by a broken manifest: %+v, then %+v", before, after)
		}
	})

	cp.step("APIServerKilled", func() {
		before := cp.pids()["kube-apiserver"]
		restarts := local["kube-apiserver"].Status.ContainerStatuses[0].RestartCount
		if err := syscall.Kill(before.PID, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		cp.eventually(3*time.Minute, "kube-apiserver restarted and Ready", func() error {
			p := cp.local()["kube-apiserver"]
			if got := p.Status.ContainerStatuses[0].RestartCount; got != restarts+1 {
				return fmt.Errorf("restart count %d", got)
			}
			return podReady(&p)
		})
		if after := cp.pids()["kube-apiserver"]; after.PID == before.PID {
			t.Errorf("kube-apiserver has the pid it had before SIGKILL: %d", after.PID)
		}
		cp.eventually(time.Minute, "the mirror status caught up", func() error {
			m, err := cp.mirrors()
			if err != nil {
				return err
			}
			p := m[local["kube-apiserver"].Name]
			if len(p.Status.ContainerStatuses) != 1 {
				return fmt.Errorf("container statuses %+v", p.Status.ContainerStatuses)
			}
			cs := p.Status.ContainerStatuses[0]
			if cs.RestartCount != restarts+1 || !cs.Ready || cs.LastTerminationState.Terminated == nil ||
				cs.LastTerminationState.Terminated.ExitCode != 137 {
				return fmt.Errorf("restarts %d ready %v last state %+v", cs.RestartCount, cs.Ready, cs.LastTerminationState)
			}
			return podReady(&p)
		})
		local = cp.local()
		mirrors = cp.waitMirrors(time.Minute, "the mirror pods after the API server's restart")
	})

	cp.step("StaticpoddKilled", func() {
		before := cp.pids()
		d.Kill9()
		// The API server still answers and still lists the mirror pods.
		m, err := cp.mirrors()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range cluster.Components {
			if p, ok := m[local[c.Name].Name]; !ok || p.UID != mirrors[c.Name].UID {
				t.Errorf("with staticpodd down, mirror pod %s: %v (UID %s, was %s)", local[c.Name].Name, ok, p.UID, mirrors[c.Name].UID)
			}
		}
		d.Start()
		cp.waitLocalReady(time.Minute, "the adopted control plane Ready")
		after := cp.waitMirrors(time.Minute, "the mirror pods after staticpodd's restart")
		for _, c := range cluster.Components {
			if after[c.Name].UID != mirrors[c.Name].UID {
				t.Errorf("mirror pod %s replaced across staticpodd's restart: %s, was %s", c.Name, after[c.Name].UID, mirrors[c.Name].UID)
			}
		}
		if got := cp.pids(); fmt.Sprint(got) != fmt.Sprint(before) {
			t.Errorf("control-plane processes before staticpodd's kill -9: %v, after its restart: %v", before, got)
		}
		for name, p := range cp.local() {
			for i, cs := range p.Status.ContainerStatuses {
				if want := local[name].Status.ContainerStatuses[i].RestartCount; cs.RestartCount != want {
					t.Errorf("%s/%s: restart count %d after staticpodd's restart, %d before", name, cs.Name, cs.RestartCount, want)
				}
			}
		}
		mirrors = after
	})

	cp.step("MirrorPodsKept", func() {
		// Through all of the above, the API server made each mirror pod
		// the test did not replace once and never refused or deleted one:
		// the API server's own, with its Secret, through its manifest
		// broken, its kill and staticpodd's. The controller manager's was
		// made again once, after the test deleted it.
		for c, want := range map[string]int{"etcd": 1, "kube-apiserver": 1, "kube-controller-manager": 2} {
			name := local[c].Name
			w, err := cp.keys.writes(name)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("audit of the mirror pod %s:\n%s", name, w.log)
			if w.created != want || w.refused != 0 {
				t.Errorf("mirror pod %s: %d creates, %d refused, want %d and none", name, w.created, w.refused, want)
			}
			if c != "kube-controller-manager" && w.deleted != 0 {
				t.Errorf("mirror pod %s: deleted %d times", name, w.deleted)
			}
		}
		if mirrors["kube-apiserver"].UID != first {
			t.Errorf("the API server's mirror pod is %s, was %s", mirrors["kube-apiserver"].UID, first)
		}
	})
}

// checkProbes checks that every probe kubeadm's manifests give passed, as
// staticpodd's /probes lists them: etcd's over HTTP to its metrics port, the
// others' over HTTPS to their probe-port, each at the host its manifest names.
func (cp *controlPlane) checkProbes(local map[string]v1.Pod) {
	cp.t.Helper()
	resp, err := cp.d.SocketClient().Get("http://staticpodd/probes")
	if err != nil {
		cp.t.Fatal(err)
	}
	defer resp.Body.Close()
	var probes []struct {
		Pod, Container, Probe, Result, Output string
	}
	if err := json.NewDecoder(resp.Body).Decode(&probes); err != nil {
		cp.t.Fatalf("decode /probes: %v", err)
	}
	results := map[string]string{}
	for _, p := range probes {
		results[p.Container+"/"+p.Probe] = p.Result
	}
	checked := 0
	for _, c := range cluster.Components {
		spec := local[c.Name].Spec.Containers[0]
		for kind, probe := range map[string]*v1.Probe{"startup": spec.StartupProbe, "liveness": spec.LivenessProbe, "readiness": spec.ReadinessProbe} {
			if probe == nil {
				continue
			}
			want := v1.URISchemeHTTPS
			if c.Name == "etcd" {
				want = v1.URISchemeHTTP
			}
			if probe.HTTPGet == nil || probe.HTTPGet.Scheme != want || probe.HTTPGet.Port.StrVal != "probe-port" {
				cp.t.Errorf("%s %s probe: %+v, want httpGet %s to probe-port", c.Name, kind, probe.ProbeHandler, want)
			}
			// The liveness probe of kubeadm's etcd starts 10 s after it.
			if r := results[c.Name+"/"+kind]; r != "success" && !(kind == "liveness" && r == "") {
				cp.t.Errorf("%s %s probe: %q, want success", c.Name, kind, r)
			}
			checked++
		}
	}
	if checked < 2*len(cluster.Components) {
		cp.t.Errorf("only %d probes in kubeadm's manifests", checked)
	}
}

// checkNodeAPI reads the node API as kubectl does, through the API server
// with its kubelet client certificate: kubectl logs of a static pod, and
// the Summary API and cAdvisor metrics through nodes/proxy, each decoded by
// its consumer's type or parser.
func (cp *controlPlane) checkNodeAPI(local map[string]v1.Pod) {
	t := cp.t
	t.Helper()
	// What kubeadm init's bootstrap-token phase binds: the API server's
	// kubelet client certificate to system:kubelet-api-admin.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cp.cl.Kubectl(ctx, "super-admin", "create", "clusterrolebinding", "kubeadm:apiserver-kubelet-client",
		"--clusterrole=system:kubelet-api-admin", "--user=kube-apiserver-kubelet-client"); err != nil {
		t.Fatal(err)
	}
	etcd := local["etcd"].Name
	cp.eventually(time.Minute, "kubectl logs of etcd", func() error {
		out, err := cp.kubectl("logs", "-n", "kube-system", etcd, "--tail=5")
		if err != nil {
			return err
		}
		if n := strings.Count(string(out), "\n"); n == 0 || n > 5 {
			return fmt.Errorf("kubectl logs --tail=5: %d lines: %q", n, out)
		}
		return nil
	})
	out, err := cp.kubectl("get", "--raw", "/api/v1/nodes/"+cp.d.Name+"/proxy/stats/summary")
	if err != nil {
		t.Fatal(err)
	}
	var sum statsapi.Summary
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatalf("decode /stats/summary: %v", err)
	}
	pods := map[string]bool{}
	for _, p := range sum.Pods {
		if p.CPU != nil && p.Memory != nil && p.Memory.WorkingSetBytes != nil && *p.Memory.WorkingSetBytes > 0 {
			pods[p.PodRef.Name] = true
		}
	}
	for _, c := range cluster.Components {
		if !pods[local[c.Name].Name] {
			t.Errorf("summary through the API server lacks %s's usage: %s", c.Name, out)
		}
	}
	out, err = cp.kubectl("get", "--raw", "/api/v1/nodes/"+cp.d.Name+"/proxy/metrics/cadvisor")
	if err != nil {
		t.Fatal(err)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(string(out)))
	if err != nil {
		t.Fatalf("parse /metrics/cadvisor: %v", err)
	}
	found := false
	for _, m := range fams["container_memory_working_set_bytes"].GetMetric() {
		for _, l := range m.GetLabel() {
			if l.GetName() == "pod" && l.GetValue() == local["kube-apiserver"].Name {
				found = true
			}
		}
	}
	if !found {
		t.Error("/metrics/cadvisor through the API server has no series of kube-apiserver")
	}
}

// checkNode checks the Node staticpodd registered with kubeadm's kubelet.conf.
func checkNode(n *v1.Node) error {
	var errs []string
	for k, want := range map[string]string{"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"} {
		if n.Labels[k] != want {
			errs = append(errs, fmt.Sprintf("label %s=%q, want %q", k, n.Labels[k], want))
		}
	}
	found := false
	for _, a := range n.Status.Addresses {
		if a.Type == v1.NodeInternalIP && a.Address == cluster.Address {
			found = true
		}
	}
	if !found {
		errs = append(errs, fmt.Sprintf("addresses %+v lack InternalIP %s", n.Status.Addresses, cluster.Address))
	}
	if n.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
		errs = append(errs, "no daemonEndpoints.kubeletEndpoint.port")
	}
	if !strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "staticpodd://") {
		errs = append(errs, fmt.Sprintf("containerRuntimeVersion %q", n.Status.NodeInfo.ContainerRuntimeVersion))
	}
	if len(errs) > 0 {
		return fmt.Errorf("node %s: %s", n.Name, strings.Join(errs, "; "))
	}
	return nil
}
