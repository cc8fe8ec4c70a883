//go:build linux && cgo

package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/staticpodd/staticpodd/agent/podspec"
	"github.com/staticpodd/staticpodd/tests/testnet"
	"github.com/staticpodd/staticpodd/tests/testroot"
)

// env is a Manager of sandboxes of the test's own, under a cgroup root of
// its own, on a network of its own once withNetwork is called.
type env struct {
	t   *testing.T
	cfg Config
	net *NetworkConfig // nil: no pod network
	m   *Manager
}

func newEnv(t *testing.T) *env {
	t.Helper()
	testroot.Require(t)
	root := "/staticpodd-test-" + randHex(4)
	e := &env{t: t, cfg: Config{
		RunDir:      filepath.Join(t.TempDir(), "run"),
		CgroupsPath: func(uid string) string { return filepath.Join(root, "pod"+uid) },
		Logger:      slog.New(slog.DiscardHandler),
	}}
	if err := os.MkdirAll(filepath.Join(e.cfg.RunDir, Dir), 0o711); err != nil {
		t.Fatal(err)
	}
	e.m = e.newManager()
	t.Cleanup(func() { _ = RemoveCgroup(root) })
	return e
}

func (e *env) newManager() *Manager {
	cfg := e.cfg
	if e.net != nil {
		cfg.Network = NewNetwork(*e.net, cfg.RunDir, cfg.Logger)
	}
	return New(cfg)
}

// withNetwork gives e's managers the built-in default network with
// Debian's plugins, on a bridge and range of the test's own.
func (e *env) withNetwork() testnet.Net {
	e.t.Helper()
	for _, p := range defaultNetworkPlugins {
		if _, err := os.Stat(filepath.Join("/usr/lib/cni", p)); err != nil {
			e.t.Fatalf("CNI plugin %s: %v (apt-get install -y containernetworking-plugins)", p, err)
		}
	}
	n := testnet.Alloc(e.t)
	top := e.t.TempDir()
	e.net = &NetworkConfig{
		ConfDir:  filepath.Join(top, "net.d"), // none: the default network
		BinDirs:  []string{"/usr/lib/cni"},    // Debian's plugins
		CacheDir: filepath.Join(e.cfg.RunDir, "cni", "cache"),
		Bridge:   n.Bridge,
		Subnet:   n.Subnet,
		IPAMDir:  filepath.Join(e.cfg.RunDir, "cni", "networks"),
	}
	e.m = e.newManager()
	return n
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (e *env) pod(hostNetwork bool) *podspec.Pod {
	uid := randHex(8)
	return &podspec.Pod{
		UID: uid, Namespace: "default", Name: "p" + uid[:6] + "-node", Hostname: "p" + uid[:6],
		HostNetwork: hostNetwork,
	}
}

func (e *env) sandbox(pod *podspec.Pod) {
	e.t.Helper()
	if err := e.m.Create(context.Background(), pod); err != nil {
		e.t.Fatal(err)
	}
}

// remove removes pod uid's sandbox, which has no containers.
func (e *env) remove(uid string) error {
	return e.m.Remove(context.Background(), uid, func() error { return nil })
}

// With no configuration and no plugins, a pod still gets its sandbox, with
// loopback only, and its status says why.
func TestNoPluginsLoopbackOnly(t *testing.T) {
	e := newEnv(t)
	e.withNetwork()
	e.net.BinDirs = []string{t.TempDir()}
	e.m = e.newManager()
	p := e.pod(false)
	e.sandbox(p)
	st, err := e.m.Status(context.Background(), p.UID)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.IPs) != 0 || !strings.Contains(st.Message, "no CNI plugin bridge, host-local, portmap") {
		t.Errorf("status without plugins: %+v", st)
	}
	if err := e.remove(p.UID); err != nil {
		t.Fatal(err)
	}
}

// A CNI configuration file that does not parse is an error naming it.
func TestBadCNIConfig(t *testing.T) {
	e := newEnv(t)
	e.withNetwork()
	if err := os.MkdirAll(e.net.ConfDir, 0o755); err != nil {
		t.Fatal(err)
	}
	bad := filepath.Join(e.net.ConfDir, "10-bad.conflist")
	if err := os.WriteFile(bad, []byte(`{"cniVersion": "1.0.0", "name": `), 0o644); err != nil {
		t.Fatal(err)
	}
	p := e.pod(false)
	err := e.m.Create(context.Background(), p)
	if err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("sandbox with a broken CNI configuration: %v, want an error naming %s", err, bad)
	}
	if _, err := os.Stat(e.m.dir(p.UID)); !os.IsNotExist(err) {
		t.Errorf("the failed sandbox is left: %v", err)
	}
}

// A pod UID (a manifest may give its own) cannot add CNI_ARGS.
func TestRuntimeConfArgs(t *testing.T) {
	uid := "x;K8S_POD_NAME=other;IgnoreUnknown=0"
	rec := netRecord{ID: cniContainerID(uid), Namespace: "default", Name: "web-node", UID: uid}
	rt := rec.runtimeConf("/run/netns/x")
	for _, kv := range rt.Args {
		if strings.ContainsAny(kv[1], ";=") {
			t.Errorf("CNI_ARGS %s=%q would add arguments", kv[0], kv[1])
		}
	}
	if rt.ContainerID != rec.ID || rt.IfName != "eth0" || rt.CapabilityArgs != nil {
		t.Errorf("runtime conf %+v", rt)
	}
}

// iptablesLog puts an iptables command first in PATH that logs each of its
// runs to the returned file and then runs the real one.
func iptablesLog(t *testing.T) string {
	t.Helper()
	real, err := masqRule{Subnet: "10.0.0.0/8"}.command()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log := filepath.Join(dir, "runs")
	script := fmt.Sprintf("#!/bin/sh\necho \"$*\" >> %s\nexec %s \"$@\"\n", log, real)
	if err := os.WriteFile(filepath.Join(dir, "iptables"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	return log
}

func readRuns(t *testing.T, log string) []string {
	t.Helper()
	data, err := os.ReadFile(log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return strings.FieldsFunc(string(data), func(r rune) bool { return r == '\n' })
}

// Only the range's first pod adds its masquerade rule, and only its last
// one deletes it: a pod without hostPorts in between runs no iptables
// command at all, so its start never waits for the machine's iptables lock.
func TestPodNetworkLaterPodsRunNoIptables(t *testing.T) {
	e := newEnv(t)
	n := e.withNetwork()
	log := iptablesLog(t)
	first, second := e.pod(false), e.pod(false)
	e.sandbox(first)
	if runs := readRuns(t, log); len(runs) == 0 || !n.MasqueradeRule(t) {
		t.Fatalf("the range's first pod ran %q and the masquerade rule is there: %v", runs, n.MasqueradeRule(t))
	}
	_ = os.Remove(log)
	e.sandbox(second)
	if err := e.remove(second.UID); err != nil {
		t.Fatal(err)
	}
	if runs := readRuns(t, log); len(runs) > 0 {
		t.Errorf("a second pod without hostPorts, added and removed, ran iptables: %q", runs)
	}
	if err := e.remove(first.UID); err != nil {
		t.Fatal(err)
	}
	if n.MasqueradeRule(t) {
		t.Errorf("the range's last pod removed, its masquerade rule is left")
	}
}

// The machine-wide iptables lock is in a directory only root writes: in a
// world-writable one (/run/lock is 1777), any local user could make the
// file first and hold its flock, and every daemon's pods would wait for it
// until their network's set-up timed out.
func TestIptablesLockNotInWorldWritableDir(t *testing.T) {
	testroot.Require(t)
	probe := filepath.Join(filepath.Dir(iptablesLock), "staticpodd-probe-"+randHex(4))
	cmd := exec.Command("/bin/sh", "-c", `: > "$1"`, "sh", probe)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	if out, err := cmd.CombinedOutput(); err == nil {
		_ = os.Remove(probe)
		t.Errorf("user nobody made %s beside the iptables lock %s: it could take the lock's place", probe, iptablesLock)
	} else {
		t.Logf("user nobody cannot make %s: %v: %s", probe, err, out)
	}
}

// A set-up that waited for the machine's iptables lock until its deadline
// says so, naming the lock, rather than only "context deadline exceeded".
func TestIptablesLockWaitSaysWhy(t *testing.T) {
	testroot.Require(t)
	f, err := os.OpenFile(iptablesLock, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	n := NewNetwork(NetworkConfig{}, t.TempDir(), slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = n.exclusive(ctx, func() error {
		t.Error("ran while another process held the lock")
		return nil
	})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), iptablesLock) {
		t.Errorf("waiting for a held iptables lock: %v, want the deadline and the lock's name", err)
	}
}

// A hostPort over one of the daemon's own TCP listeners (the read-only port
// here) is refused, naming it: portmap's DNAT would take the listener's
// connections to the host's other addresses. UDP on that port, and TCP on
// another address than the listener's, are not its.
func TestHostPortOverOwnPortRefused(t *testing.T) {
	e := newEnv(t)
	e.withNetwork()
	own := int32(testnet.FreeTCPPort(t))
	e.net.OwnPorts = []OwnPort{{Name: "readOnlyPort", Address: "127.0.0.1", Port: own}}
	e.m = e.newManager()
	p := e.pod(false)
	p.PortMappings = []podspec.PortMapping{{HostPort: own, ContainerPort: 81, Protocol: "tcp"}}
	err := e.m.Create(context.Background(), p)
	if want := fmt.Sprintf("hostPort %d/TCP: staticpodd's own readOnlyPort listens there", own); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("a hostPort on the daemon's own port: %v, want %q", err, want)
	}
	if _, err := os.Stat(e.m.dir(p.UID)); !os.IsNotExist(err) {
		t.Errorf("the refused pod's sandbox is left: %v", err)
	}
	for _, ok := range []podspec.PortMapping{
		{HostPort: own, ContainerPort: 81, Protocol: "udp"},
		{HostPort: own, ContainerPort: 81, Protocol: "tcp", HostIP: "127.0.0.2"},
	} {
		q := e.pod(false)
		q.PortMappings = []podspec.PortMapping{ok}
		e.sandbox(q)
		if err := e.remove(q.UID); err != nil {
			t.Fatal(err)
		}
	}
}

// One pod publishing one port twice on overlapping addresses ("" and
// 0.0.0.0 are both every address; validation compares them as written) is
// refused as two pods would be, not left to portmap's first rule.
func TestHostPortTwiceInOnePodRefused(t *testing.T) {
	e := newEnv(t)
	e.withNetwork()
	port := int32(testnet.FreeTCPPort(t))
	for _, second := range []string{"0.0.0.0", "127.0.0.1"} {
		p := e.pod(false)
		p.PortMappings = []podspec.PortMapping{
			{HostPort: port, ContainerPort: 80, Protocol: "tcp"},
			{HostPort: port, ContainerPort: 81, Protocol: "tcp", HostIP: second},
		}
		err := e.m.Create(context.Background(), p)
		if want := fmt.Sprintf("hostPort %d/TCP: published twice by the pod", port); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("hostIP \"\" and %q on one port: %v, want %q", second, err, want)
		}
		if _, err := os.Stat(e.m.dir(p.UID)); !os.IsNotExist(err) {
			t.Errorf("the refused pod's sandbox is left: %v", err)
		}
	}
	// Two addresses of their own do not overlap.
	q := e.pod(false)
	q.PortMappings = []podspec.PortMapping{
		{HostPort: port, ContainerPort: 80, Protocol: "tcp", HostIP: "127.0.0.1"},
		{HostPort: port, ContainerPort: 81, Protocol: "tcp", HostIP: "127.0.0.2"},
	}
	e.sandbox(q)
	if err := e.remove(q.UID); err != nil {
		t.Fatal(err)
	}
}

// The CNI configuration directory is read again at each status (chosen),
// so at every sync of every pod: a pod that mounts it to install its
// network's configuration must not be able to stall those syncs with a
// FIFO, nor have the daemon read a device or a huge file there.
func TestCNIConfigNotRegularRefused(t *testing.T) {
	dir := t.TempDir()
	n := NewNetwork(NetworkConfig{ConfDir: dir}, t.TempDir(), slog.New(slog.DiscardHandler))
	fifo := filepath.Join(dir, "10-fifo.conflist")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		make func() error
	}{
		{"a FIFO", func() error { return nil }},
		{"a link to a device", func() error { os.Remove(fifo); return os.Symlink("/dev/zero", fifo) }},
		{"a huge file", func() error {
			os.Remove(fifo)
			f, err := os.Create(fifo)
			if err != nil {
				return err
			}
			defer f.Close()
			return f.Truncate(1 << 30)
		}},
	} {
		if err := tc.make(); err != nil {
			t.Fatal(err)
		}
		done := make(chan podspec.NetworkConf, 1)
		go func() { done <- n.chosen() }()
		select {
		case got := <-done:
			if got.Network != "" || !strings.Contains(got.Why, fifo) {
				t.Errorf("%s as the CNI configuration: %+v, want an error naming it", tc.name, got)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%s as the CNI configuration: chosen blocks", tc.name)
		}
	}
}

// A .conflist's plugins in its network's directory (CNI 1.3's
// loadOnlyInlinedPlugins: false) are loaded, each read as the list is.
func TestCNIConfigPluginDir(t *testing.T) {
	dir := t.TempDir()
	n := NewNetwork(NetworkConfig{ConfDir: dir}, t.TempDir(), slog.New(slog.DiscardHandler))
	write := func(name, s string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("10-net.conflist", `{"cniVersion": "1.0.0", "name": "net", "plugins": [{"type": "bridge"}]}`)
	write("net/20-portmap.conf", `{"type": "portmap"}`)
	if got := n.chosen(); !slices.Equal(got.Plugins, []string{"bridge", "portmap"}) {
		t.Errorf("chosen %+v, want bridge and portmap from net/", got)
	}
	fifo := filepath.Join(dir, "net", "30-fifo.conf")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan podspec.NetworkConf, 1)
	go func() { done <- n.chosen() }()
	select {
	case got := <-done:
		if got.Network != "" || !strings.Contains(got.Why, fifo) {
			t.Errorf("a FIFO among the plugins: %+v, want an error naming it", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a FIFO among the plugins: chosen blocks")
	}
}
