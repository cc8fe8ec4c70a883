//go:build kubeadm

package kubeadm

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/staticpodd/staticpodd/tests/controlplane/cluster"
	"github.com/staticpodd/staticpodd/tests/testdaemon"
)

// edgeWeb is the appliance's one pod.
const edgeWeb = `apiVersion: v1
kind: Pod
metadata:
  name: web
spec:
  terminationGracePeriodSeconds: 2
  containers:
  - name: main
    image: busybox:latest
    imagePullPolicy: Never
    command: ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1 & wait $!; done # edge1-web"]
`

// mirrorGuideSteps follows docs/guides/mirror-pods.md: an appliance, edge1,
// with the staticpodd package's unit and configuration and one pod, gets its
// node credentials by TLS bootstrap from cp1's cluster; its node and mirror
// pod appear; cp1's API server goes away and comes back while the pod runs
// on, the same container.
func mirrorGuideSteps(t *testing.T, bin string, cp1 *Machine) {
	t.Helper()
	ns, err := cluster.NewNetnsAt("staticpodd-kubeadm-"+testdaemon.RandHex(4), "192.0.2.13")
	if err != nil {
		t.Fatal(err)
	}
	edge := NewMachine(t, "edge1", "192.0.2.13", ns, bin, testdaemon.Bin, testdaemon.Bin, os.Getenv("CRICTL"))
	if err := Connect(cp1, edge); err != nil {
		t.Fatal(err)
	}
	// The staticpodd package, installed: its unit, /etc/default/staticpodd
	// and config.yaml, whose cgroupRoot is the machine's own (machines share
	// one host's cgroups); an image imported and a manifest.
	unit, err := UnitExecStart("../../packaging/staticpodd.service")
	if err != nil {
		t.Fatal(err)
	}
	edge.SetExecStart(unit)
	cfg, err := os.ReadFile("../../packaging/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(cfg), "cgroupRoot: /staticpodd\n") {
		t.Fatalf("packaging/config.yaml has no cgroupRoot: /staticpodd line to give the machine its own")
	}
	writeFile(t, edge.Host("/etc/staticpodd/config.yaml"), strings.Replace(string(cfg), "cgroupRoot: /staticpodd\n", "cgroupRoot: "+edge.Cgroup+"\n", 1))
	// The machine shares the host's host name: its node name is given, as
	// the guide's STATICPODD_ARGS keep giving it.
	writeFile(t, edge.Host("/etc/default/staticpodd"), `STATICPODD_ARGS="--hostname-override edge1"`+"\n")
	copyFile(t, testdaemon.Image, edge.Host("/root/busybox.tar"))
	edge.Sh(time.Minute, "staticpodd images import busybox.tar")
	// The directories the package's tmpfiles.d makes.
	for _, dir := range []string{"/etc/kubernetes/manifests", "/var/lib/staticpodd", "/run/staticpodd", "/var/log/pods"} {
		if err := os.MkdirAll(edge.Host(dir), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, edge.Host("/etc/kubernetes/manifests/web.yaml"), edgeWeb)
	edge.Sh(time.Minute, "systemctl start staticpodd")
	waitOn(t, edge, time.Minute, "staticpodd ps | awk '$2 == \"web-edge1\" {print $4}'", "Running")
	webPID := edge.Stdout(time.Minute, "pgrep -f 'edge1[-]web'")

	// The guide.
	token := strings.TrimSpace(cp1.Stdout(time.Minute, mgTokenCreate))
	copyFile(t, cp1.Host("/etc/kubernetes/pki/ca.crt"), edge.Host("/etc/staticpodd/ca.crt"))
	for _, line := range []string{mgSetCluster, mgSetCredentials, mgSetContext, mgUseContext, mgArgs, mgRotate} {
		edge.Sh(time.Minute, fmt.Sprintf("export TOKEN=%s; %s", token, line))
	}
	edge.Sh(2*time.Minute, mgRestart)
	defer func() {
		edge.Sh(time.Minute, "rm /etc/kubernetes/manifests/web.yaml")
		waitOn(t, edge, 2*time.Minute, "ls /run/staticpodd/pods | wc -l", "0")
		edge.Sh(time.Minute, "systemctl stop staticpodd")
	}()
	waitOn(t, cp1, 2*time.Minute, "kubectl get node edge1 -o jsonpath='{.spec.unschedulable}'", "true")
	for _, line := range []string{mgGetCSR, mgGetNode, mgGetPods} {
		t.Logf("%s$ %s\n%s", cp1.Name, line, cp1.Sh(time.Minute, line))
	}
	if out := cp1.Sh(time.Minute, mgGetCSR); !strings.Contains(out, "system:bootstrap:") || !strings.Contains(out, "Approved,Issued") {
		t.Errorf("no CSR of the bootstrap token approved and issued:\n%s", out)
	}
	if out := cp1.Sh(time.Minute, mgGetNode); !strings.Contains(out, "SchedulingDisabled") {
		t.Errorf("edge1 is not shown SchedulingDisabled:\n%s", out)
	}
	mirror := `kubectl get pod web-edge1 -n default -o jsonpath='{.status.phase} {.metadata.annotations.kubernetes\.io/config\.source} {.metadata.ownerReferences[0].kind}'`
	waitOn(t, cp1, time.Minute, mirror, "Running file Node")
	if got := edge.Stdout(time.Minute, "pgrep -f 'edge1[-]web'"); got != webPID {
		t.Errorf("the pod's process was %s before the restart, %s after: restarted", strings.TrimSpace(webPID), strings.TrimSpace(got))
	}

	// The outage: the pod runs on; the mirror client's health says so.
	cp1.Sh(time.Minute, mgStopAPI)
	waitOn(t, edge, 2*time.Minute, mgHealthz+" | grep -c '^\\[-\\]mirror-pods failed since'", "1")
	t.Logf("%s$ %s\n%s", edge.Name, mgHealthz, edge.Sh(time.Minute, mgHealthz))
	t.Logf("%s$ %s\n%s", edge.Name, mgPs, edge.Sh(time.Minute, mgPs))
	if got := edge.Stdout(time.Minute, "pgrep -f 'edge1[-]web'"); got != webPID {
		t.Errorf("the pod's process changed during the outage: %s, then %s", strings.TrimSpace(webPID), strings.TrimSpace(got))
	}
	cp1.Sh(time.Minute, mgStartAPI)
	waitOn(t, edge, 3*time.Minute, mgHealthz+" | grep -c '^\\[+\\]mirror-pods ok'", "1")
	waitOn(t, cp1, time.Minute, mirror, "Running file Node")
	waitMirrors(t, cp1, true)
}
