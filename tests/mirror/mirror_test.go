//go:build controlplane

// Package mirror tests staticpodd's mirror pods, Node, Lease and events
// against a real etcd and kube-apiserver with the Node authorizer and
// NodeRestriction, staticpodd using a node's credentials. It runs from make
// test-controlplane (build tag controlplane), which builds the binaries.
package mirror

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/staticpodd/staticpodd/tests/kubeapi"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

func TestMain(m *testing.M) { os.Exit(testdaemon.Main(m)) }

const (
	annotationMirror = "kubernetes.io/config.mirror"
	annotationHash   = "kubernetes.io/config.hash"
)

func sleeper(name, env string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: default
spec:
  terminationGracePeriodSeconds: 3
  containers:
  - name: main
    image: busybox
    env: [{name: GEN, value: %q}]
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done"]
`, name, env)
}

// fixture is a cluster, a fault proxy before it, and a staticpodd using a
// node's credentials through the proxy.
type fixture struct {
	t     *testing.T
	c     *kubeapi.Cluster
	proxy *kubeapi.FaultProxy
	d     *testdaemon.Daemon
}

func newFixture(t *testing.T) *fixture {
	return fixtureOn(t, kubeapi.Start(t))
}

func fixtureOn(t *testing.T, c *kubeapi.Cluster) *fixture {
	d := testdaemon.New(t)
	proxy := c.StartProxy(d.Name)
	d.Args = append(d.Args, "--kubeconfig", c.NodeKubeconfig(d.Name, proxy.URL), "--node-ip", "127.0.0.1")
	return &fixture{t: t, c: c, proxy: proxy, d: d}
}

// mirror returns the mirror pod of the static pod name, or nil.
func (f *fixture) mirror(name string) *v1.Pod {
	p, err := f.c.Admin.CoreV1().Pods("default").Get(context.Background(), name+"-"+f.d.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		f.t.Logf("get mirror pod: %v", err)
		return nil
	}
	return p
}

// waitMirror waits until the mirror pod of name satisfies ok.
func (f *fixture) waitMirror(name string, timeout time.Duration, what string, ok func(*v1.Pod) error) *v1.Pod {
	f.t.Helper()
	var p *v1.Pod
	f.d.Eventually(timeout, what, func() error {
		p = f.mirror(name)
		if p == nil {
			return fmt.Errorf("no mirror pod %s-%s", name, f.d.Name)
		}
		return ok(p)
	})
	return p
}

func running(p *v1.Pod) error {
	if p.Status.Phase != v1.PodRunning {
		return fmt.Errorf("mirror phase %q", p.Status.Phase)
	}
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
		return fmt.Errorf("mirror container statuses %+v", p.Status.ContainerStatuses)
	}
	return nil
}

// waitGeneration waits until the local pod name of generation gen (its GEN
// variable) runs, and returns it.
func (f *fixture) waitGeneration(name, gen string) *v1.Pod {
	f.t.Helper()
	var pod *v1.Pod
	f.d.Eventually(30*time.Second, name+" generation "+gen+" running", func() error {
		for _, p := range f.d.Pods() {
			if p.Name != name+"-"+f.d.Name || p.DeletionTimestamp != nil || len(p.Spec.Containers) == 0 {
				continue
			}
			env := p.Spec.Containers[0].Env
			if len(env) == 0 || env[0].Value != gen {
				continue
			}
			if p.Status.Phase != v1.PodRunning || len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Running == nil {
				return fmt.Errorf("generation %s: phase %s", gen, p.Status.Phase)
			}
			pod = &p
			return nil
		}
		return fmt.Errorf("no generation %s", gen)
	})
	return pod
}

func containerID(p *v1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 {
		return ""
	}
	return p.Status.ContainerStatuses[0].ContainerID
}

func (f *fixture) healthz() string {
	resp, err := f.d.Client().Get(f.d.URL("/healthz?verbose"))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestMirrorPods(t *testing.T) {
	f := newFixture(t)
	d, admin := f.d, f.c.Admin
	ctx := context.Background()
	d.WriteManifest("web.yaml", sleeper("web", "1"))
	d.Start()
	local := f.waitGeneration("web", "1")

	// The mirror pod: the static pod with the mirror annotation, owned by
	// the Node, with the static pod's status.
	mp := f.waitMirror("web", 30*time.Second, "the mirror pod running", running)
	if got, want := mp.Annotations[annotationMirror], local.Annotations[annotationHash]; got == "" || got != want {
		t.Errorf("mirror annotation %q, want the config hash %q", got, want)
	}
	node, err := admin.CoreV1().Nodes().Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	if len(mp.OwnerReferences) != 1 || mp.OwnerReferences[0].Kind != "Node" || mp.OwnerReferences[0].UID != node.UID ||
		mp.OwnerReferences[0].Controller == nil || !*mp.OwnerReferences[0].Controller {
		t.Errorf("mirror owner references %+v, want one controller reference to node %s", mp.OwnerReferences, node.UID)
	}
	if containerID(mp) != containerID(local) || mp.Status.HostIP != "127.0.0.1" || mp.Status.QOSClass != v1.PodQOSBestEffort || mp.Status.StartTime == nil {
		t.Errorf("mirror status %+v\nwant the local one %+v", mp.Status, local.Status)
	}

	// The Node: Ready, its labels, its nodeInfo; the Lease renewed.
	t.Run("node", func(t *testing.T) {
		d.Eventually(30*time.Second, "the node Ready", func() error {
			n, err := admin.CoreV1().Nodes().Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range n.Status.Conditions {
				if c.Type == v1.NodeReady && c.Status == v1.ConditionTrue {
					node = n
					return nil
				}
			}
			return fmt.Errorf("conditions %+v", n.Status.Conditions)
		})
		for k, want := range map[string]string{"kubernetes.io/hostname": d.Name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"} {
			if node.Labels[k] != want {
				t.Errorf("node label %s=%q, want %q", k, node.Labels[k], want)
			}
		}
		if !strings.HasPrefix(node.Status.NodeInfo.ContainerRuntimeVersion, "staticpodd://") || node.Status.NodeInfo.KubeletVersion == "" {
			t.Errorf("nodeInfo %+v", node.Status.NodeInfo)
		}
		for _, typ := range []v1.NodeConditionType{v1.NodeMemoryPressure, v1.NodeDiskPressure, v1.NodePIDPressure} {
			found := false
			for _, c := range node.Status.Conditions {
				found = found || (c.Type == typ && c.Status == v1.ConditionFalse)
			}
			if !found {
				t.Errorf("node condition %s not False: %+v", typ, node.Status.Conditions)
			}
		}
		if _, ok := node.Status.Capacity[v1.ResourceMemory]; !ok {
			t.Errorf("node capacity %v has no memory", node.Status.Capacity)
		}
		lease, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, d.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("lease: %v", err)
		}
		first := lease.Spec.RenewTime.Time
		d.Eventually(20*time.Second, "the lease renewed", func() error {
			l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !l.Spec.RenewTime.Time.After(first) {
				return fmt.Errorf("renewTime still %v", first)
			}
			return nil
		})
	})

	// Events: the pod's lifecycle, on the mirror pod, and the node's Starting.
	t.Run("events", func(t *testing.T) {
		d.Eventually(20*time.Second, "events posted", func() error {
			evs, err := admin.CoreV1().Events("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return err
			}
			var started, starting bool
			for _, e := range evs.Items {
				if e.Source.Component != "staticpodd" || e.Source.Host != d.Name {
					continue
				}
				started = started || (e.Reason == "Started" && e.InvolvedObject.Name == "web-"+d.Name && e.InvolvedObject.UID == mp.UID)
				starting = starting || (e.Reason == "Starting" && e.InvolvedObject.Kind == "Node")
			}
			if !started || !starting {
				return fmt.Errorf("Started on the mirror pod: %v, node Starting: %v (of %d events)", started, starting, len(evs.Items))
			}
			return nil
		})
	})

	// kubectl delete (graceful) and a forced delete: back within 2 s,
	// the container untouched.
	for _, grace := range []int64{30, 0} {
		t.Run(fmt.Sprintf("delete-grace-%d", grace), func(t *testing.T) {
			old := f.mirror("web")
			began := time.Now()
			if err := admin.CoreV1().Pods("default").Delete(ctx, old.Name, metav1.DeleteOptions{GracePeriodSeconds: &grace}); err != nil {
				t.Fatal(err)
			}
			p := f.waitMirror("web", 10*time.Second, "the mirror pod made again", func(p *v1.Pod) error {
				if p.UID == old.UID || p.DeletionTimestamp != nil {
					return fmt.Errorf("still the old one")
				}
				return running(p)
			})
			took := time.Since(began)
			t.Logf("mirror pod back %v after its deletion (grace %d)", took.Round(time.Millisecond), grace)
			if took > 2*time.Second {
				t.Errorf("mirror pod back after %v, want within 2s", took)
			}
			if containerID(p) != containerID(local) {
				t.Errorf("container %s after the mirror's deletion, want %s untouched", containerID(p), containerID(local))
			}
			if now := d.Pod("web"); now == nil || containerID(now) != containerID(local) || now.Status.ContainerStatuses[0].RestartCount != 0 {
				t.Errorf("local pod after the mirror's deletion: %+v", now)
			}
		})
	}

	// A manifest edit: the mirror pod is replaced by one of the new hash.
	t.Run("edit", func(t *testing.T) {
		old := f.mirror("web")
		d.WriteManifest("web.yaml", sleeper("web", "2"))
		local = f.waitGeneration("web", "2")
		f.waitMirror("web", 30*time.Second, "the new generation's mirror pod", func(p *v1.Pod) error {
			if p.UID == old.UID || p.Annotations[annotationMirror] != local.Annotations[annotationHash] {
				return fmt.Errorf("mirror hash %s, want %s", p.Annotations[annotationMirror], local.Annotations[annotationHash])
			}
			if containerID(p) != containerID(local) {
				return fmt.Errorf("mirror container %s, want %s", containerID(p), containerID(local))
			}
			return running(p)
		})
	})

	// Faults between staticpodd and the API server: the local pods go on, a
	// new pod starts on time, healthz says what fails, and the mirror pods
	// catch up once the API server answers again.
	for _, mode := range []string{"5xx", "401", "slow"} {
		t.Run("fault-"+mode, func(t *testing.T) {
			f.proxy.Set(mode)
			name := "during-" + mode
			began := time.Now()
			d.WriteManifest(name+".yaml", sleeper(name, "1"))
			d.WaitRunning(name, 30*time.Second)
			t.Logf("pod %s running %v after its manifest with the API server failing (%s)", name, time.Since(began).Round(time.Millisecond), mode)
			if mode != "slow" {
				d.Eventually(20*time.Second, "healthz names the failure", func() error {
					if h := f.healthz(); !strings.Contains(h, "[-]mirror-pods") {
						return fmt.Errorf("healthz:\n%s", h)
					}
					return nil
				})
			}
			if now := d.Pod("web"); now == nil || containerID(now) != containerID(local) {
				t.Errorf("web changed while the API server failed: %+v", now)
			}
			f.proxy.Set("")
			fixed := time.Now()
			f.waitMirror(name, 30*time.Second, "the mirror pod once the API server answers", running)
			t.Logf("mirror pod of %s %v after the API server answered again", name, time.Since(fixed).Round(time.Millisecond))
		})
	}

	// staticpodd restarted (and killed): its mirror pods stay, not deleted and
	// made again while the new daemon has not read its manifests yet.
	for _, how := range []string{"sigterm", "kill-9"} {
		t.Run("daemon-restart-"+how, func(t *testing.T) {
			list, err := admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", d.Name).String()})
			if err != nil {
				t.Fatal(err)
			}
			if how == "sigterm" {
				d.Stop()
			} else {
				d.Kill9()
			}
			d.Start()
			d.Eventually(30*time.Second, "the daemon ready with its mirror pods in order", func() error {
				if !strings.Contains(d.Output(), "all sources seen and pods synced: ready") {
					return fmt.Errorf("not ready")
				}
				if h := f.healthz(); !strings.Contains(h, "[+]mirror-pods ok") {
					return fmt.Errorf("healthz:\n%s", h)
				}
				return nil
			})
			for _, p := range list.Items {
				now, err := admin.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
				if err != nil || now.UID != p.UID {
					t.Errorf("mirror pod %s after the daemon's restart: %v (uid %v, was %s)", p.Name, err, now.UID, p.UID)
				}
			}
			if out := d.Output(); strings.Contains(out, "deleted mirror pod") {
				t.Errorf("the restarted daemon deleted mirror pods:\n%s", out)
			}
		})
	}

	// The API server stopped and started again: pods untouched, a pod
	// edited meanwhile has its new mirror pod soon after.
	t.Run("apiserver-restart", func(t *testing.T) {
		f.c.APIServer.Kill()
		d.WriteManifest("web.yaml", sleeper("web", "3"))
		local = f.waitGeneration("web", "3")
		before := d.Pod("during-5xx")
		f.c.StartAPIServer()
		ready := f.c.WaitReady(90 * time.Second)
		f.waitMirror("web", 30*time.Second, "the mirror pod of the generation made while the API server was down", func(p *v1.Pod) error {
			if p.Annotations[annotationMirror] != local.Annotations[annotationHash] {
				return fmt.Errorf("mirror hash %s, want %s", p.Annotations[annotationMirror], local.Annotations[annotationHash])
			}
			return running(p)
		})
		t.Logf("mirror pod caught up %v after /readyz", time.Since(ready).Round(time.Millisecond))
		if after := d.Pod("during-5xx"); after == nil || containerID(after) != containerID(before) {
			t.Errorf("a pod changed across the API server's restart: %v → %v", containerID(before), after)
		}
	})

	// A removed static pod's mirror pod goes too.
	t.Run("orphan", func(t *testing.T) {
		d.RemoveManifest("during-401.yaml")
		d.Eventually(30*time.Second, "the orphaned mirror pod removed", func() error {
			if p := f.mirror("during-401"); p != nil {
				return fmt.Errorf("still there: %s", p.UID)
			}
			return nil
		})
		list, err := admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.nodeName", d.Name).String()})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) != 3 {
			t.Errorf("%d mirror pods on the node, want 3 (web, during-5xx, during-slow)", len(list.Items))
		}
	})
}

// The bootstrap case: staticpodd starts before the API server (one of its own
// static pods, in a control plane), whose first answers refuse pods of the
// system-node-critical PriorityClass until its post-start hook has made it.
// The mirror pods appear within a second of /readyz, not at a later sync.
func TestMirrorPodsBeforeTheAPIServer(t *testing.T) {
	c := kubeapi.New(t)
	f := fixtureOn(t, c)
	d := f.d
	critical := strings.Replace(sleeper("critical", "1"), "spec:\n", "spec:\n  priorityClassName: system-node-critical\n  priority: 2000001000\n", 1)
	d.WriteManifest("web.yaml", sleeper("web", "1"))
	d.WriteManifest("critical.yaml", critical)
	d.Start()
	f.waitGeneration("web", "1")
	f.waitGeneration("critical", "1")
	if h := f.healthz(); !strings.Contains(h, "[-]mirror-pods") {
		t.Errorf("healthz with no API server:\n%s", h)
	}

	c.StartAPIServer()
	ready := c.WaitReady(90 * time.Second)
	for _, name := range []string{"web", "critical"} {
		f.waitMirror(name, 30*time.Second, "the mirror pod of "+name, running)
	}
	took := time.Since(ready)
	t.Logf("both mirror pods running on the API server %v after /readyz", took.Round(time.Millisecond))
	if took > time.Second {
		t.Errorf("mirror pods %v after /readyz, want within 1s", took)
	}
	t.Logf("refusals for want of the PriorityClass in the daemon's log: %d", strings.Count(d.Output(), "no PriorityClass with name"))
	if p := f.mirror("critical"); p.Spec.PriorityClassName != "system-node-critical" {
		t.Errorf("mirror priorityClassName %q", p.Spec.PriorityClassName)
	}
	d.Eventually(30*time.Second, "healthz ok again", func() error {
		if h := f.healthz(); !strings.Contains(h, "[+]mirror-pods ok") {
			return fmt.Errorf("healthz:\n%s", h)
		}
		return nil
	})
}

// Credentials that may not register this Node (another node's): the pods run
// all the same, healthz says why nothing shows on the API server, and
// nothing is made there in this node's name.
func TestCredentialsThatMayNotRegisterTheNode(t *testing.T) {
	c := kubeapi.Start(t)
	d := testdaemon.New(t)
	server := c.Server()
	d.Args = append(d.Args, "--kubeconfig", c.NodeKubeconfig("some-other-node", server), "--node-ip", "127.0.0.1")
	f := &fixture{t: t, c: c, d: d}
	d.WriteManifest("web.yaml", sleeper("web", "1"))
	d.Start()
	f.waitGeneration("web", "1")
	d.Eventually(30*time.Second, "healthz names the refusal", func() error {
		if h := f.healthz(); !strings.Contains(h, "[-]mirror-pods") || !strings.Contains(h, "forbidden") {
			return fmt.Errorf("healthz:\n%s", h)
		}
		return nil
	})
	if _, err := c.Admin.CoreV1().Nodes().Get(context.Background(), d.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node %s with another node's credentials: %v, want not found", d.Name, err)
	}
	if p := f.mirror("web"); p != nil {
		t.Errorf("a mirror pod was made: %s", p.UID)
	}
	if !d.Running() {
		t.Error("the daemon stopped")
	}
}
