//go:build linux && cgo

package oci

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/tests/testnet"
)

// withNetwork gives e's runtimes the built-in default network with Debian's
// plugins, on a bridge and range of the test's own.
func (e *env) withNetwork() testnet.Net {
	e.t.Helper()
	for _, p := range []string{"bridge", "host-local", "portmap"} { // the default network's
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", p)); err != nil {
			e.t.Fatalf("CNI plugin %s: %v (apt-get install -y containernetworking-plugins)", p, err)
		}
	}
	n := testnet.Alloc(e.t)
	top := e.t.TempDir()
	e.cfg.Network = &NetworkConfig{
		ConfDir:  filepath.Join(top, "net.d"), // none: the default network
		BinDirs:  []string{"/usr/lib/cni"},    // Debian's plugins
		CacheDir: filepath.Join(e.cfg.RunDir, "cni", "cache"),
		Bridge:   n.Bridge,
		Subnet:   n.Subnet,
		IPAMDir:  filepath.Join(e.cfg.RunDir, "cni", "networks"),
	}
	e.rt = e.newRuntime()
	return n
}

// httpdScript serves "hello from NAME" on port 81, as the seed's nginx pod.
func httpdScript(name string) string {
	return fmt.Sprintf("mkdir -p /www && echo hello from %s > /www/index.html && exec httpd -f -p 81 -h /www", name)
}

func (e *env) podIP(pod *podspec.Pod) netip.Addr {
	e.t.Helper()
	st, err := e.rt.SandboxStatus(context.Background(), pod.UID)
	if err != nil {
		e.t.Fatal(err)
	}
	if len(st.IPs) != 1 {
		e.t.Fatalf("pod %s has IPs %v (%s), want one", pod.Name, st.IPs, st.Message)
	}
	return st.IPs[0]
}

// netLeftovers lists what of pod id ("": of any pod) is left on the host.
func netLeftovers(t *testing.T, n testnet.Net, ipamDir, id string) []string {
	t.Helper()
	left, err := n.Leftovers(ipamDir, id)
	if err != nil {
		t.Fatal(err)
	}
	return left
}

// The seed's nginx-shaped pod (busybox httpd on port 81) gets an address on
// the default network that the host reaches, a hostPort published on the
// host, and its /etc/hosts names it; two pods reach each other; a second pod
// asking for the same hostPort is refused, naming the first; removal leaves
// no veth, rule or lease.
func TestPodNetwork(t *testing.T) {
	e := newEnv(t)
	n := e.withNetwork()
	hostPort := int32(testnet.FreeTCPPort(t))
	a, b := e.pod(false), e.pod(false)
	a.PortMappings = []podspec.PortMapping{{HostPort: hostPort, ContainerPort: 81, Protocol: "tcp"}}
	e.sandbox(a)
	e.sandbox(b)
	ca := e.start(a, e.container(a, "web", httpdScript("a")))
	cb := e.start(b, e.container(b, "web", httpdScript("b")))
	ipA, ipB := e.podIP(a), e.podIP(b)
	for _, ip := range []netip.Addr{ipA, ipB} {
		if !n.Subnet.Contains(ip) {
			t.Errorf("pod IP %s is not in the network's range %s", ip, n.Subnet)
		}
	}
	if got := testnet.GetUntil(t, fmt.Sprintf("http://%s:81/", ipA)); got != "hello from a\n" {
		t.Errorf("the host got %q from pod a's IP", got)
	}
	if got := testnet.GetUntil(t, fmt.Sprintf("http://%s:81/", ipB)); got != "hello from b\n" {
		t.Errorf("the host got %q from pod b's IP", got)
	}
	// The hostPort on the bridge's address, an address of the host.
	gw := n.Subnet.Addr().Next()
	if got := testnet.GetUntil(t, fmt.Sprintf("http://%s:%d/", gw, hostPort)); got != "hello from a\n" {
		t.Errorf("the host got %q from hostPort %d", got, hostPort)
	}
	// Pod a reaches pod b.
	var out bytes.Buffer
	code, err := e.rt.Exec(context.Background(), ca.ID, podspec.ExecSpec{
		Cmd: []string{"wget", "-q", "-O-", fmt.Sprintf("http://%s:81/", ipB)}, Stdout: &out, Stderr: &out, Timeout: 20 * time.Second,
	})
	if err != nil || code != 0 || out.String() != "hello from b\n" {
		t.Errorf("pod a fetching pod b: exit %d, %v: %q", code, err, out.String())
	}
	hosts, err := os.ReadFile(filepath.Join(e.rt.podDir(a.UID), "hosts"))
	if err != nil {
		t.Fatal(err)
	}
	if want := ipA.String() + "\t" + a.Hostname + "\n"; !strings.Contains(string(hosts), want) {
		t.Errorf("pod a's /etc/hosts has no line %q:\n%s", want, hosts)
	}

	// A third pod asking for a's hostPort is refused, and leaves nothing.
	c := e.pod(false)
	c.PortMappings = []podspec.PortMapping{{HostPort: hostPort, ContainerPort: 80, Protocol: "tcp"}}
	err = e.rt.CreateSandbox(context.Background(), c)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("hostPort %d/TCP: already published on every address by pod default/%s", hostPort, a.Name)) {
		t.Errorf("a second pod on hostPort %d: %v", hostPort, err)
	}
	if _, err := os.Stat(e.rt.podDir(c.UID)); !os.IsNotExist(err) {
		t.Errorf("the refused pod's sandbox is left: %v", err)
	}

	for _, p := range []struct {
		pod *podspec.Pod
		ctr podspec.ContainerStatus
	}{{a, ca}, {b, cb}} {
		if err := e.rt.Signal(context.Background(), p.ctr.ID, 9); err != nil {
			t.Fatal(err)
		}
		e.wait(p.ctr.ID)
		e.destroy(p.ctr.ID)
		if err := e.rt.RemoveSandbox(context.Background(), p.pod.UID); err != nil {
			t.Fatal(err)
		}
		if left := netLeftovers(t, n, e.cfg.Network.IPAMDir, p.pod.UID); len(left) > 0 {
			t.Errorf("pod %s removed, left: %q", p.pod.Name, left)
		}
		if p.pod == a && !n.MasqueradeRule(t) {
			t.Errorf("pod a removed, b still there: the range's masquerade rule is gone")
		}
	}
	if left := netLeftovers(t, n, e.cfg.Network.IPAMDir, ""); len(left) > 0 {
		t.Errorf("every pod removed, left: %q", left)
	}
	// The hostPort is free again: a new pod gets it.
	d := e.pod(false)
	d.PortMappings = c.PortMappings
	e.sandbox(d)
	if err := e.rt.RemoveSandbox(context.Background(), d.UID); err != nil {
		t.Fatal(err)
	}
}

// A sandbox whose record was never written (the daemon died after ADD) is
// removed by the next runtime with a DEL from what was recorded before ADD
// and libcni's cached result: no veth, rule or lease is left.
func TestPartialSandboxNetworkDeleted(t *testing.T) {
	e := newEnv(t)
	n := e.withNetwork()
	p := e.pod(false)
	p.PortMappings = []podspec.PortMapping{{HostPort: int32(testnet.FreeTCPPort(t)), ContainerPort: 81, Protocol: "tcp"}}
	e.sandbox(p)
	if left := netLeftovers(t, n, e.cfg.Network.IPAMDir, p.UID); len(left) == 0 {
		t.Fatal("the attached sandbox shows nothing on the host: the leak check would find nothing")
	}
	if err := os.Remove(filepath.Join(e.rt.podDir(p.UID), podFile)); err != nil {
		t.Fatal(err)
	}
	e.rt = e.newRuntime()
	if left := netLeftovers(t, n, e.cfg.Network.IPAMDir, ""); len(left) > 0 {
		t.Errorf("partial sandbox removed, left: %q", left)
	}
	if _, err := os.Stat(e.rt.podDir(p.UID)); !os.IsNotExist(err) {
		t.Errorf("the partial sandbox's dir is left: %v", err)
	}
}

// A sandbox adopted by a new runtime keeps its IP (from its record), and
// CNI's CHECK of it passes; once its default route is gone, CHECK fails
// and the status says so.
func TestAdoptedSandboxNetworkChecked(t *testing.T) {
	e := newEnv(t)
	n := e.withNetwork()
	p := e.pod(false)
	e.sandbox(p)
	ip := e.podIP(p)
	e.rt = e.newRuntime()
	<-e.rt.checked
	st, err := e.rt.SandboxStatus(context.Background(), p.UID)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.IPs) != 1 || st.IPs[0] != ip || st.Message != "" {
		t.Errorf("adopted sandbox status %+v, want IP %s and no message", st, ip)
	}
	// Take the pod's route away behind the runtime's back.
	if out, err := exec.Command("nsenter", "--net="+filepath.Join(e.rt.podDir(p.UID), nsNet), "ip", "route", "del", "default").CombinedOutput(); err != nil {
		t.Fatalf("delete the default route: %v: %s", err, out)
	}
	e.rt = e.newRuntime()
	<-e.rt.checked
	st, err = e.rt.SandboxStatus(context.Background(), p.UID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(st.Message, "check pod network") {
		t.Errorf("status of a sandbox without its route: %+v, want a failed check", st)
	}
	if err := e.rt.RemoveSandbox(context.Background(), p.UID); err != nil {
		t.Fatal(err)
	}
	if left := netLeftovers(t, n, e.cfg.Network.IPAMDir, ""); len(left) > 0 {
		t.Errorf("sandbox removed, left: %q", left)
	}
}

// A pod reaches an address beyond the host with the host's address (the
// range's one masquerade rule), and a pod without hostPorts changes no
// iptables rule of its own: nothing in the nat or filter table names it.
// "Beyond the host" is a network namespace of the test's own behind a veth,
// whose listener reports the address a connection came from.
func TestPodNetworkMasquerade(t *testing.T) {
	e := newEnv(t)
	n := e.withNetwork()
	k := n.Subnet.Addr().As4()[2]
	hostSide := netip.AddrFrom4([4]byte{10, 98, k, 1})
	outside := netip.AddrFrom4([4]byte{10, 98, k, 2})
	ns := fmt.Sprintf("spdt%d-out", k)
	hostIf, outIf := n.Bridge+"x", n.Bridge+"y"
	_ = exec.Command("ip", "netns", "del", ns).Run() // a killed run's
	_ = exec.Command("ip", "link", "del", hostIf).Run()
	for _, args := range [][]string{
		{"netns", "add", ns},
		{"link", "add", hostIf, "type", "veth", "peer", "name", outIf},
		{"link", "set", outIf, "netns", ns},
		{"addr", "add", hostSide.String() + "/30", "dev", hostIf},
		{"link", "set", hostIf, "up"},
		{"-n", ns, "addr", "add", outside.String() + "/30", "dev", outIf},
		{"-n", ns, "link", "set", outIf, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	t.Cleanup(func() {
		_ = exec.Command("ip", "link", "del", hostIf).Run()
		_ = exec.Command("ip", "netns", "del", ns).Run()
	})
	// The listener's socket is made on a thread in the outside namespace;
	// the thread ends with its goroutine, the socket stays there.
	lnc := make(chan net.Listener, 1)
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread goes with the goroutine
		f, err := os.Open("/run/netns/" + ns)
		if err != nil {
			errc <- err
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			return
		}
		ln, err := net.Listen("tcp", outside.String()+":8080")
		if err != nil {
			errc <- err
			return
		}
		lnc <- ln
	}()
	var ln net.Listener
	select {
	case ln = <-lnc:
	case err := <-errc:
		t.Fatal(err)
	}
	defer ln.Close()
	go http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintf(w, "from %s\n", host)
	}))

	p := e.pod(false)
	e.sandbox(p)
	c := e.start(p, e.container(p, "client", "sleep 3600"))
	if !n.MasqueradeRule(t) {
		t.Errorf("no masquerade rule for %s while a pod is on it", n.Subnet)
	}
	for _, table := range []string{"nat", "filter"} {
		out, err := exec.Command("iptables-save", "-t", table).CombinedOutput()
		if err != nil {
			t.Fatalf("iptables-save: %v: %s", err, out)
		}
		// The pod's CNI container ID is its UID, which CNI accepts as it is.
		if id := p.UID; strings.Contains(string(out), id) {
			t.Errorf("a pod without hostPorts has iptables %s rules of its own:\n%s", table, out)
		}
	}
	var out bytes.Buffer
	code, err := e.rt.Exec(context.Background(), c.ID, podspec.ExecSpec{
		Cmd: []string{"wget", "-q", "-O-", fmt.Sprintf("http://%s:8080/", outside)}, Stdout: &out, Stderr: &out, Timeout: 20 * time.Second,
	})
	if want := fmt.Sprintf("from %s\n", hostSide); err != nil || code != 0 || out.String() != want {
		t.Errorf("pod fetching from beyond the host: exit %d, %v: %q, want %q (the pod's %s masqueraded)", code, err, out.String(), want, e.podIP(p))
	}
	if err := e.rt.Signal(context.Background(), c.ID, 9); err != nil {
		t.Fatal(err)
	}
	e.wait(c.ID)
	e.destroy(c.ID)
	if err := e.rt.RemoveSandbox(context.Background(), p.UID); err != nil {
		t.Fatal(err)
	}
	if n.MasqueradeRule(t) {
		t.Errorf("the range's last pod removed, its masquerade rule is left")
	}
	if left := netLeftovers(t, n, e.cfg.Network.IPAMDir, ""); len(left) > 0 {
		t.Errorf("pod removed, left: %q", left)
	}
}
