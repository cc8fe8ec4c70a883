package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/staticpodd/staticpodd/tests/testdaemon"
	"github.com/staticpodd/staticpodd/tests/testnet"
)

// webPod is the seed's nginx-shaped pod: busybox httpd on port 81 (serving
// its own name), with hostPort when not 0.
func webPod(name string, hostPort int) string {
	port := "        - containerPort: 81\n"
	if hostPort != 0 {
		port += fmt.Sprintf("          hostPort: %d\n", hostPort)
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %[1]s
spec:
  terminationGracePeriodSeconds: 3
  containers:
    - name: web
      image: busybox
      command: ["sh", "-c", "mkdir -p /www && echo hello from %[1]s > /www/index.html && trap 'exit 0' TERM; httpd -f -p 81 -h /www & wait"]
      env:
        - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
      ports:
%[2]s`, name, port)
}

// podIP is the pod's IP from its status, checked to be in the daemon's
// pod network.
func podIP(d *daemon, pod *v1.Pod) netip.Addr {
	d.T.Helper()
	ip, err := netip.ParseAddr(pod.Status.PodIP)
	if err != nil {
		d.T.Fatalf("pod %s: podIP %q: %v", pod.Name, pod.Status.PodIP, err)
	}
	if !d.Net.Subnet.Contains(ip) {
		d.T.Errorf("pod %s: podIP %s not in the pod network %s", pod.Name, ip, d.Net.Subnet)
	}
	if len(pod.Status.PodIPs) != 1 || pod.Status.PodIPs[0].IP != pod.Status.PodIP {
		d.T.Errorf("pod %s: podIPs %v, want [%s]", pod.Name, pod.Status.PodIPs, ip)
	}
	return ip
}

// The seed's nginx-shaped pod, without hostNetwork, is reachable from the
// host at its pod IP and through its hostPort; another pod reaches it; a
// second pod asking for its hostPort is refused, naming it, and starts once
// the port is free; removing them leaves no veth, iptables rule or lease
// (the harness's leak check after the test). Its /etc/hosts names it at its
// IP, and a pod with dnsPolicy None has the resolv.conf of its dnsConfig.
func TestPodNetworkReachable(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	hostPort := testdaemon.FreePort(t)
	d.WriteManifest("web.yaml", webPod("web", hostPort))
	d.WriteManifest("client.yaml", sleeper("client", "  dnsPolicy: None\n  dnsConfig: {nameservers: [192.0.2.53], searches: [svc.example], options: [{name: ndots, value: '2'}]}\n"))
	d.Start()
	web := d.WaitRunning("web", 30*time.Second)
	ip := podIP(d, web)
	if got := testnet.GetUntil(t, fmt.Sprintf("http://%s:81/", ip)); got != "hello from web\n" {
		t.Errorf("the host got %q at the pod IP", got)
	}
	gw := d.Net.Subnet.Addr().Next() // the bridge's address, the host's
	if got := testnet.GetUntil(t, fmt.Sprintf("http://%s:%d/", gw, hostPort)); got != "hello from web\n" {
		t.Errorf("the host got %q at hostPort %d", got, hostPort)
	}
	// And on the host's loopback (portmap's snat sets route_localnet).
	if got := testnet.GetUntil(t, fmt.Sprintf("http://127.0.0.1:%d/", hostPort)); got != "hello from web\n" {
		t.Errorf("the host got %q at 127.0.0.1:%d", got, hostPort)
	}
	client := d.WaitRunning("client", 30*time.Second)
	podIP(d, client)
	if out := d.CLI("exec", client.Name, "--", "wget", "-q", "-O-", fmt.Sprintf("http://%s:81/", ip)); out != "hello from web\n" {
		t.Errorf("the client pod got %q from the web pod", out)
	}
	if out := d.CLI("exec", client.Name, "--", "cat", "/etc/resolv.conf"); out != "search svc.example\nnameserver 192.0.2.53\noptions ndots:2\n" {
		t.Errorf("the client pod's resolv.conf from its dnsConfig:\n%s", out)
	}
	if out := d.CLI("exec", web.Name, "--", "sh", "-c", "echo $POD_IP"); out != ip.String()+"\n" {
		t.Errorf("the web pod's POD_IP (status.podIP) is %q, want %s", out, ip)
	}
	if out := d.CLI("exec", web.Name, "--", "cat", "/etc/hosts"); !strings.Contains(out, ip.String()+"\tweb-"+d.Name+"\n") {
		t.Errorf("the web pod's /etc/hosts does not name it at %s:\n%s", ip, out)
	}

	d.WriteManifest("web2.yaml", webPod("web2", hostPort))
	want := fmt.Sprintf("hostPort %d/TCP: already published on every address by pod default/%s", hostPort, web.Name)
	d.Eventually(30*time.Second, "the second pod on the hostPort refused", func() error {
		p := d.Pod("web2")
		if p == nil {
			return errors.New("no pod web2")
		}
		for _, cs := range p.Status.ContainerStatuses {
			if w := cs.State.Waiting; w != nil && strings.Contains(w.Message, want) {
				return nil
			}
		}
		return fmt.Errorf("status %+v", p.Status.ContainerStatuses)
	})
	d.RemoveManifest("web.yaml")
	web2 := d.WaitRunning("web2", 60*time.Second)
	if got := testnet.GetUntil(t, fmt.Sprintf("http://%s:%d/", gw, hostPort)); got != "hello from web2\n" {
		t.Errorf("the host got %q at hostPort %d after the first pod went", got, hostPort)
	}
	if left, err := d.Net.Leftovers(d.IPAMDir(), string(web.UID)); err != nil || len(left) > 0 {
		t.Errorf("the removed pod left %q (%v)", left, err)
	}
	podIP(d, web2)
}

// 50 pods made and removed 4 times leave the host's interfaces, iptables
// rules and leases as they were: no veth on the daemon's bridge, no rule
// naming its range, no lease (the host's other interfaces and rules change
// with the tests running beside this one: they are not this daemon's).
func TestPodNetworkChurn(t *testing.T) {
	t.Parallel()
	const pods, cycles = 50, 4
	d := newDaemon(t)
	d.Start()
	for c := range cycles {
		for i := range pods {
			d.WriteManifest(fmt.Sprintf("p%d.yaml", i), sleeper(fmt.Sprintf("p%d", i), ""))
		}
		d.Eventually(3*time.Minute, fmt.Sprintf("cycle %d: %d pods running with IPs", c, pods), func() error {
			ips := map[string]bool{}
			for _, p := range d.Pods() {
				if p.Status.Phase == v1.PodRunning && p.Status.PodIP != "" {
					ips[p.Status.PodIP] = true
				}
			}
			if len(ips) != pods {
				return fmt.Errorf("%d distinct pod IPs of running pods", len(ips))
			}
			return nil
		})
		if n := bridgePorts(t, d.Net.Bridge); n != pods {
			t.Fatalf("cycle %d: %d veths on %s with %d pods running", c, n, d.Net.Bridge, pods)
		}
		for i := range pods {
			d.RemoveManifest(fmt.Sprintf("p%d.yaml", i))
		}
		d.Eventually(3*time.Minute, fmt.Sprintf("cycle %d: every pod gone", c), func() error {
			if n := len(d.Pods()); n > 0 {
				return fmt.Errorf("%d pods", n)
			}
			if sbs, _ := os.ReadDir(filepath.Join(d.RunDir, "pods")); len(sbs) > 0 {
				return fmt.Errorf("%d sandboxes", len(sbs))
			}
			return nil
		})
		if left, err := d.Net.Leftovers(d.IPAMDir(), ""); err != nil || len(left) > 0 {
			t.Fatalf("cycle %d: left %q (%v)", c, left, err)
		}
	}
}

// bridgePorts counts the interfaces on bridge.
func bridgePorts(t *testing.T, bridge string) int {
	t.Helper()
	out, err := exec.Command("ip", "-o", "link", "show", "master", bridge).Output()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}

// blockingNetwork writes into the daemon's CNI configuration directory its
// pod network with BlockPlugin chained last, and returns the directory of
// BlockPlugin's marks.
func blockingNetwork(t *testing.T, d *daemon) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, marks := filepath.Join(d.Dir, "cni-bin"), filepath.Join(d.Dir, "marks")
	for _, dir := range []string{bin, marks} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Link(exe, filepath.Join(bin, testnet.BlockPluginName)); err != nil {
		if err := os.Symlink(exe, filepath.Join(bin, testnet.BlockPluginName)); err != nil {
			t.Fatal(err)
		}
	}
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "blocking",
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": d.Net.Bridge, "isGateway": true, "ipMasq": true,
				"ipam": map[string]any{
					"type": "host-local", "ranges": [][]map[string]string{{{"subnet": d.Net.Subnet.String()}}},
					"dataDir": d.IPAMDir(),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
			map[string]any{"type": testnet.BlockPluginName, "markDir": marks},
		},
	}
	data, _ := json.Marshal(conf)
	if err := os.WriteFile(filepath.Join(d.CNIConfDir, "10-blocking.conflist"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	d.Args = append(d.Args, "--cni-bin-dir", bin+",/usr/lib/cni")
	return marks
}

// kill -9 of the daemon in the middle of an ADD, then of a DEL: the next
// daemon finishes the job, and nothing is left once the pod is gone.
func TestPodNetworkKill9DuringAddAndDel(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	marks := blockingNetwork(t, d)
	hostPort := testdaemon.FreePort(t)
	block := func(cmd string) {
		if err := os.WriteFile(filepath.Join(marks, "block-"+cmd), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	unblock := func(cmd string) { os.Remove(filepath.Join(marks, "block-"+cmd)) }
	waitMark := func(name string) {
		d.Eventually(60*time.Second, "the plugin's "+name+" mark", func() error {
			_, err := os.Stat(filepath.Join(marks, name))
			return err
		})
	}

	block("ADD")
	d.WriteManifest("web.yaml", webPod("web", hostPort))
	d.Start()
	waitMark("ADD-started")
	d.Kill9()
	unblock("ADD")
	os.Remove(filepath.Join(marks, "ADD-started"))
	d.Start()
	web := d.WaitRunning("web", 60*time.Second)
	ip := podIP(d, web)
	if got := testnet.GetUntil(t, fmt.Sprintf("http://%s:%d/", d.Net.Subnet.Addr().Next(), hostPort)); got != "hello from web\n" {
		t.Errorf("after the ADD cut short, the host got %q at hostPort %d", got, hostPort)
	}
	// Only the new attachment's lease is held: the cut one's was given back.
	leases, _ := filepath.Glob(filepath.Join(d.IPAMDir(), "blocking", "10.*"))
	if len(leases) != 1 || filepath.Base(leases[0]) != ip.String() {
		t.Errorf("leases after the ADD cut short: %v, want only %s", leases, ip)
	}

	block("DEL")
	d.RemoveManifest("web.yaml")
	waitMark("DEL-started")
	d.Kill9()
	unblock("DEL")
	d.Start()
	d.Eventually(60*time.Second, "the pod gone", func() error {
		if d.Pod("web") != nil {
			return errStill
		}
		if sbs, _ := os.ReadDir(filepath.Join(d.RunDir, "pods")); len(sbs) > 0 {
			return fmt.Errorf("%d sandboxes", len(sbs))
		}
		return nil
	})
	if left, err := d.Net.Leftovers(d.IPAMDir(), ""); err != nil || len(left) > 0 {
		t.Errorf("after the DEL cut short, left %q (%v)", left, err)
	}
}

// Which CNI network and plugins a pod got is in the log, its events and ps
// -o wide; a configuration file that another package drops into the
// directory, sorting first, is warned about (log, event, ps) on the running
// pod, which keeps its network, and the warning goes with the file.
func TestPodNetworkSwitchIsSaid(t *testing.T) {
	t.Parallel()
	d := newDaemon(t)
	d.WriteManifest("sw.yaml", sleeper("sw", ""))
	d.Start()
	pod := d.WaitRunning("sw", 30*time.Second)
	got := `default/` + pod.Name + `: network "staticpodd" from default (plugins bridge)`
	if out := d.CLI("ps", "-o", "wide"); !strings.Contains(out, "Pod networks:\n  "+got) || strings.Contains(out, "WARNING") {
		t.Errorf("ps -o wide does not say which network the pod got:\n%s", out)
	}
	if out := d.CLI("events"); !strings.Contains(out, "NetworkAttached") || !strings.Contains(out, `Attached to CNI network "staticpodd" from default (plugins bridge)`) {
		t.Errorf("no NetworkAttached event:\n%s", out)
	}
	d.WaitLine(10*time.Second, `msg="pod attached to its network"`)

	// As podman's package does: a file that sorts before every other.
	other := filepath.Join(d.CNIConfDir, "00-other.conflist")
	conf := `{"cniVersion": "1.0.0", "name": "other", "plugins": [{"type": "bridge", "bridge": "other0"}, {"type": "firewall"}]}`
	if err := os.WriteFile(other, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	now := `a pod made now gets network "other" from ` + other + ` (plugins bridge, firewall)`
	d.Eventually(30*time.Second, "the warning event", func() error {
		out := d.CLI("events")
		if !strings.Contains(out, "NetworkConfigChanged") || !strings.Contains(out, now) {
			return fmt.Errorf("no NetworkConfigChanged event:\n%s", out)
		}
		return nil
	})
	if out := d.CLI("ps", "-o", "wide"); !strings.Contains(out, got) || !strings.Contains(out, "WARNING: the CNI configuration changed, "+now) {
		t.Errorf("ps -o wide does not warn of the change:\n%s", out)
	}
	// The warning is in the log too.
	d.WaitLine(10*time.Second, "the CNI configuration changed under a running pod")
	if err := os.Remove(other); err != nil {
		t.Fatal(err)
	}
	if out := d.CLI("ps", "-o", "wide"); strings.Contains(out, "WARNING") {
		t.Errorf("the warning stays after the file went:\n%s", out)
	}
	d.RemoveManifest("sw.yaml")
	d.Eventually(60*time.Second, "pod removed", func() error {
		if d.Pod("sw") != nil {
			return errStill
		}
		return nil
	})
}
