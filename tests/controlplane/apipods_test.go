//go:build controlplane

package controlplane

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
)

// The pods the API server has for a staticpodd node, with the real scheduler
// and controller manager: the Node is unschedulable and has room only for
// its static pods, so the scheduler places nothing there and says why; a pod
// bound to it anyway is failed as the kubelet fails a pod it cannot admit.
const apiPods = `apiVersion: apps/v1
kind: Deployment
metadata: {name: tolerates-all, namespace: default}
spec:
  selector: {matchLabels: {app: tolerates-all}}
  template:
    metadata: {labels: {app: tolerates-all}}
    spec:
      tolerations: [{operator: Exists}]
      containers: [{name: c, image: registry.k8s.io/pause:3.10.1}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: plain, namespace: default}
spec:
  selector: {matchLabels: {app: plain}}
  template:
    metadata: {labels: {app: plain}}
    spec:
      containers: [{name: c, image: registry.k8s.io/pause:3.10.1}]
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: proxy-like, namespace: kube-system}
spec:
  selector: {matchLabels: {app: proxy-like}}
  template:
    metadata: {labels: {app: proxy-like}}
    spec:
      priorityClassName: system-node-critical
      tolerations: [{operator: Exists}]
      containers: [{name: c, image: registry.k8s.io/pause:3.10.1}]
`

// boundPod is a pod made with spec.nodeName, past the scheduler.
func boundPod(name, node string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  nodeName: %s
  containers: [{name: c, image: registry.k8s.io/pause:3.10.1}]
`, name, node)
}

// podsOf lists the pods of a namespace with a label selector ("" for all).
func (cp *controlPlane) podsOf(ns, selector string) ([]v1.Pod, error) {
	args := []string{"get", "pods", "-n", ns, "-o", "json"}
	if selector != "" {
		args = append(args, "-l", selector)
	}
	out, err := cp.kubectl(args...)
	if err != nil {
		return nil, err
	}
	var list v1.PodList
	if err := json.Unmarshal(out, &list); err != nil {
		return nil, fmt.Errorf("decode kubectl get pods: %w", err)
	}
	return list.Items, nil
}

// unscheduled checks that the one pod of selector is Pending, unbound, with
// the scheduler's PodScheduled=False reason Unschedulable and a message
// that contains want.
func (cp *controlPlane) unscheduled(ns, selector, want string) error {
	pods, err := cp.podsOf(ns, selector)
	if err != nil {
		return err
	}
	if len(pods) != 1 {
		return fmt.Errorf("%s: %d pods", selector, len(pods))
	}
	p := pods[0]
	if p.Spec.NodeName != "" || p.Status.Phase != v1.PodPending {
		return fmt.Errorf("%s: node %q phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == v1.PodScheduled {
			if c.Status != v1.ConditionFalse || c.Reason != v1.PodReasonUnschedulable || !strings.Contains(c.Message, want) {
				return fmt.Errorf("%s: PodScheduled %s %s %q, want False Unschedulable with %q", p.Name, c.Status, c.Reason, c.Message, want)
			}
			cp.t.Logf("%s: %s", p.Name, c.Message)
			return nil
		}
	}
	return fmt.Errorf("%s: no PodScheduled condition", p.Name)
}

// rejected checks that pod name of namespace default was failed by
// staticpodd, with its event, and returns it.
func (cp *controlPlane) rejected(name string) error {
	pods, err := cp.podsOf("default", "")
	if err != nil {
		return err
	}
	for _, p := range pods {
		if p.Name != name {
			continue
		}
		if p.Status.Phase != v1.PodFailed || p.Status.Reason != "StaticPodsOnly" ||
			!strings.HasPrefix(p.Status.Message, "Pod was rejected: node "+cp.d.Name+" is run by staticpodd") {
			return fmt.Errorf("%s: phase %s reason %q message %q", name, p.Status.Phase, p.Status.Reason, p.Status.Message)
		}
		out, err := cp.kubectl("get", "events", "-n", "default", "--field-selector", "involvedObject.uid="+string(p.UID), "-o", "json")
		if err != nil {
			return err
		}
		var evs v1.EventList
		if err := json.Unmarshal(out, &evs); err != nil {
			return err
		}
		for _, ev := range evs.Items {
			if ev.Type == v1.EventTypeWarning && ev.Reason == "StaticPodsOnly" && ev.Source.Host == cp.d.Name &&
				"Pod was rejected: "+ev.Message == p.Status.Message {
				return nil
			}
		}
		return fmt.Errorf("%s: no StaticPodsOnly event: %+v", name, evs.Items)
	}
	return fmt.Errorf("no pod %s", name)
}

func TestPodsOfTheAPIServer(t *testing.T) {
	cp := start(t)
	cp.waitLocalReady(4*time.Minute, "the control plane's four pods Ready")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cp.eventually(time.Minute, "kubeadm:cluster-admins bound with super-admin.conf", func() error {
		return cp.cl.BindClusterAdmins(ctx)
	})
	before := cp.waitMirrors(time.Minute, "the four mirror pods")

	cp.step("NodeUnschedulable", func() {
		cp.eventually(time.Minute, "the Node unschedulable, tainted so, with room for its static pods only", func() error {
			n, err := cp.node()
			if err != nil {
				return err
			}
			if !n.Spec.Unschedulable {
				return fmt.Errorf("spec.unschedulable false")
			}
			tainted := false
			for _, taint := range n.Spec.Taints {
				tainted = tainted || taint.Key == v1.TaintNodeUnschedulable && taint.Effect == v1.TaintEffectNoSchedule
			}
			if !tainted {
				return fmt.Errorf("taints %+v", n.Spec.Taints)
			}
			if pods := n.Status.Allocatable[v1.ResourcePods]; pods.Value() != 4 {
				return fmt.Errorf("allocatable pods %s", pods.String())
			}
			return nil
		})
		out, err := cp.kubectl("get", "node", cp.d.Name)
		if err != nil || !strings.Contains(string(out), "SchedulingDisabled") {
			t.Errorf("kubectl get node: %s %v", out, err)
		}
	})

	dir := t.TempDir()
	file := filepath.Join(dir, "pods.yaml")
	if err := os.WriteFile(file, []byte(apiPods+"---\n"+boundPod("bound", cp.d.Name)), 0o644); err != nil {
		t.Fatal(err)
	}
	// The namespace's ServiceAccount comes from the controller manager.
	cp.eventually(time.Minute, "the pods applied", func() error {
		_, err := cp.kubectl("apply", "-f", file)
		return err
	})

	cp.step("SchedulerPlacesNothing", func() {
		cp.eventually(time.Minute, "the plain Deployment's pod unschedulable", func() error {
			return cp.unscheduled("default", "app=plain", "node(s) were unschedulable")
		})
		// Tolerating the unschedulable taint passes that filter: the
		// node's allocatable pods keep the pod off.
		cp.eventually(time.Minute, "the Deployment's pod that tolerates all taints unschedulable", func() error {
			return cp.unscheduled("default", "app=tolerates-all", "Too many pods")
		})
		cp.eventually(time.Minute, "the DaemonSet's pod unschedulable", func() error {
			return cp.unscheduled("kube-system", "app=proxy-like", "Too many pods")
		})
	})

	cp.step("BoundPodFailed", func() {
		cp.eventually(30*time.Second, "the pod made with spec.nodeName failed, with its event", func() error {
			return cp.rejected("bound")
		})
	})

	cp.step("Uncordoned", func() {
		if _, err := cp.kubectl("uncordon", cp.d.Name); err != nil {
			t.Fatal(err)
		}
		cp.eventually(30*time.Second, "the Node unschedulable again", func() error {
			n, err := cp.node()
			if err != nil {
				return err
			}
			if !n.Spec.Unschedulable {
				return fmt.Errorf("spec.unschedulable false")
			}
			return nil
		})
		// Meanwhile the scheduler still had no room for the pods.
		if err := cp.unscheduled("default", "app=tolerates-all", "Too many pods"); err != nil {
			t.Error(err)
		}
	})

	cp.step("MirrorPodsUntouched", func() {
		after := cp.waitMirrors(10*time.Second, "the four mirror pods")
		for name, m := range after {
			if m.UID != before[name].UID {
				t.Errorf("mirror pod %s: uid %s, was %s", m.Name, m.UID, before[name].UID)
			}
		}
	})

	cp.step("ManyBoundPods", func() { cp.flood(dir) })
}

// flood binds many pods to the node at once, as a hostile user could, and
// measures staticpodd's resident memory while it fails them (at its rate
// limit): it holds references to a bounded number only.
func (cp *controlPlane) flood(dir string) {
	t := cp.t
	n := 1000
	if s := os.Getenv("STATICPODD_FLOOD_PODS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatal(err)
		}
	}
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: List\nitems:\n")
	for i := range n {
		// Each with a 4 KiB annotation: the daemon must not keep pods.
		fmt.Fprintf(&b, "- {apiVersion: v1, kind: Pod, metadata: {name: flood-%d, namespace: flood, annotations: {pad: %q}}, "+
			"spec: {nodeName: %s, containers: [{name: c, image: registry.k8s.io/pause:3.10.1}]}}\n", i, strings.Repeat("x", 4096), cp.d.Name)
	}
	file := filepath.Join(dir, "flood.yaml")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.kubectl("create", "namespace", "flood"); err != nil {
		t.Fatal(err)
	}
	cp.eventually(time.Minute, "the flood namespace's ServiceAccount", func() error {
		_, err := cp.kubectl("get", "serviceaccount", "-n", "flood", "default")
		return err
	})
	rss0 := rss(t, cp.d.PID())
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := cp.cl.Kubectl(ctx, "admin", "create", "-f", file, "-o", "name"); err != nil {
		t.Fatal(err)
	}
	created := time.Since(start)
	// Sample while the backlog is failed, for a minute.
	peak := rss0
	var failed int
	for range 60 {
		time.Sleep(time.Second)
		peak = max(peak, rss(t, cp.d.PID()))
	}
	pods, err := cp.podsOf("flood", "")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Status.Phase == v1.PodFailed {
			failed++
		}
	}
	t.Logf("%d pods bound in %.1fs; a minute later %d failed; staticpodd RSS %d KiB before, peak %d KiB (+%d KiB)",
		n, created.Seconds(), failed, rss0, peak, peak-rss0)
	if failed == 0 {
		t.Error("no pod of the flood failed")
	}
	if growth := peak - rss0; growth > 32<<10 {
		t.Errorf("staticpodd's RSS grew by %d KiB with %d pods bound to the node", growth, n)
	}
}

// rss is VmRSS of pid, in KiB.
func rss(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return kb
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
